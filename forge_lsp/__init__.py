"""forge-lsp: optimize PyTorch modules into verified, profiled GPU kernels from the editor."""

__version__ = "0.1.0"
