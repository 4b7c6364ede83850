"""ONNX Runtime: device choice and placement, sessions and scoring, the Netron viewer on 127.0.0.1."""
