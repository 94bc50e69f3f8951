"""Package discovery: the design card's folders (hw/, golden/, ...) sit at the top of the
repository and install as subpackages of `edgexpert`, so no generic top-level `hw` or `sim` module
exists. Every package below each folder is found by setuptools, never listed by hand, so a new
bench or block folder cannot be left out of a wheel. Metadata and dependencies are in
pyproject.toml."""

from setuptools import find_packages, setup

#: import name -> folder
ROOTS = {"edgexpert": "edgexpert", "edgexpert.hw": "hw", "edgexpert.golden": "golden",
         "edgexpert.sim": "sim", "edgexpert.synth": "synth", "edgexpert.cocotb_tests": "cocotb_tests",
         "edgexpert.formal": "formal"}

packages = [name for root, folder in ROOTS.items()
            for name in [root] + [f"{root}.{sub}" for sub in find_packages(folder)]]
setup(package_dir=ROOTS, packages=packages)
