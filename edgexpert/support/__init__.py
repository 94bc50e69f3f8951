"""What every layer uses and no contract defines: external tools (paths, versions, the build
folder) and progress on stderr."""
