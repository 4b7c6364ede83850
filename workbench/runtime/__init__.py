"""ONNX Runtime: device choice and placement (device), sessions and scoring (ortinfer), the
Netron viewer on 127.0.0.1 (netron_view)."""
