"""support/code.py: cache keys hash a module's code, not its documentation."""

from edgexpert.support.code import code_only

SOURCE = '''"""A module."""
# a comment
def f(x):
    """Twice x."""
    return 2 * x  # doubled


class C:
    """A class."""
'''


def test_comments_and_docstrings_do_not_count():
    edited = (SOURCE.replace("A module.", "The module, reworded.").replace("# a comment", "")
              .replace("Twice x.", "x, doubled.").replace("  # doubled", "")
              .replace('"""A class."""', '"""A class,\n    documented over two lines."""'))
    assert code_only(edited) == code_only(SOURCE)


def test_code_counts():
    assert code_only(SOURCE.replace("2 * x", "3 * x")) != code_only(SOURCE)
    # a string that is not the body's first statement is code
    assert code_only(SOURCE.replace("return 2 * x", "'kept'\n    return 2 * x")) != \
        code_only(SOURCE)
