"""Duplex agents the driver can run: in-process ones and socket links."""
