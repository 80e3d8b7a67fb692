"""PyTorch on OpenHLO: the ``openhlo`` torch.compile backend, export to StableHLO and the
ATen-to-StableHLO lowering registry, and ``quantize_`` (see README.md)."""
from frameworks.torch.backend import openhlo_backend
from frameworks.torch.export import ExportedStableHLO, ExportError, export_to_stablehlo
from frameworks.torch.lowering import LOWERINGS, Unsupported, lowers
from frameworks.torch.metrics import metrics_report, reset_metrics
from frameworks.torch.quantize import QuantizedLinear, quantize_

__all__ = ["openhlo_backend", "export_to_stablehlo", "ExportedStableHLO", "ExportError",
           "LOWERINGS", "lowers", "Unsupported", "metrics_report", "reset_metrics",
           "quantize_", "QuantizedLinear"]
