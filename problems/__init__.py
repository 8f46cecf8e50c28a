"""The bundled problem suite (KernelBench format). Not imported as modules: loaded as files."""
