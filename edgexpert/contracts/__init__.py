"""The bottom layer: contracts every other package may import, importing nothing of the project
above it: the configuration, errors, tool discovery and build paths, the weight layout and image,
the EMA command contract, and the trace and mask-trace formats (docs/architecture.md)."""
