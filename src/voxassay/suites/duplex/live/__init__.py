"""Live full-duplex sessions: the driver, its clocks, playback model and agent links."""
