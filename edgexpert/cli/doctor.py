"""`doctor`: every tool and library the flows need, with its version."""

from __future__ import annotations

from .common import load, print_json, settings_options

__all__ = ["register"]


def cmd_doctor(args) -> int:
    from ..support.tools import check_tools
    load(args)   # a configuration that does not load is worth knowing before any flow runs
    tools = check_tools()
    if args.json:
        print_json({t.name: {"found": t.found, "version": t.version, "location": t.location}
                    for t in tools})
    else:
        width = max(len(t.name) for t in tools)
        for t in tools:
            status = t.version if t.found else "MISSING"
            print(f"{t.name:<{width}}  {status:<20}  {t.location}")
        for t in tools:
            if not t.found:
                print(f"{t.name}: run {t.hint}")
    return 0 if all(t.found for t in tools) else 1


def register(sub) -> None:
    p = sub.add_parser("doctor", parents=[settings_options()],
                       help="list every tool and library with its version; --config and --set "
                            "are checked to load")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_doctor)
