"""`routing`: the routing model of the full-size estimates fitted on a bundled model's decoding
(golden/studies/routing_stats.py, sim/perf/routing.py; docs/performance-model.md, "Routing
model"). The bundled prompts are decoded plainly and speculatively (naive_sd on the EAGLE
head), the routing kept, the model fitted; build/routing/<model>.json holds the observations'
moments, the fitted parameters and the in-sample errors."""

from __future__ import annotations

from .common import golden_inputs, load, publish, quiet_requested, settings_options

__all__ = ["register"]


def cmd_routing(args) -> int:
    import torch

    from ..golden.decoding.eagle.files import load_eagle
    from ..golden.studies.routing_stats import routing_observations
    from ..sim.perf.routing import MC_SEED, fit_routing, nodes_per_depth

    config = load(args)
    torch.set_num_threads(1)
    ckpt, _, prompts, eot = golden_inputs(config)
    head = load_eagle(ckpt.model, ckpt.path / "eagle")[0]
    obs = routing_observations(ckpt, config, prompts, eot, head,
                               progress=not quiet_requested(args))
    fit = fit_routing(obs, seed=MC_SEED)
    result = {"model": obs["model"], "experts": obs["experts"], "top_k": obs["top_k"],
              "decode_seed": obs["seed"], "draft": obs["draft"], "decode": obs["decode"],
              "tokens_per_step": obs["tokens_per_step"],
              "tree_nodes_per_depth": nodes_per_depth(obs), **fit}

    def table(path) -> None:
        p = result["params"]
        print(f"routing model of the {p['model']} model ({p['experts']} experts, top-{p['top_k']})"
              f": {obs['prompts']} prompts, decode seed {obs['seed']}, Monte Carlo seed "
              f"{fit['seed']} ({fit['samples']} draws per tree, {fit['trees']} trees)")
        print(f"  fitted: skew {p['skew']} (Zipf s {p['zipf_s']}), sigma {p['sigma']}, context "
              f"{p['context']}, q_seq {p['q_seq']}, q_sib {p['q_sib']}")
        print(f"  {'moment':<16}{'observed':>10}{'model':>10}{'error':>9}")
        for key, err in fit["errors"].items():
            print(f"  {key:<16}{fit['observed'][key]:>10.3f}{fit['model'][key]:>10.3f}"
                  f"{err:>+9.1%}")
        print(f"  tree nodes per depth {result['tree_nodes_per_depth']}, "
              f"{obs['tokens_per_step']} tokens per step")
        print(f"results {path}")

    publish(args, result, ("routing", f"{obs['model']}.json"), table)
    return 0


def register(sub) -> None:
    p = sub.add_parser("routing", parents=[settings_options()],
                       help="fit the full-size estimates' routing model on a bundled model's "
                            "decoding (--set model.name=fine for the fine twin)")
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    p.set_defaults(func=cmd_routing)
