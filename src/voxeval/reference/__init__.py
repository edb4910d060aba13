"""The reference duplex agent: a real local voice agent used as the default system under test."""
