"""Backpressure engine: pure, deterministic capacity and load math."""

ENGINE_VERSION = "0.1.0"
