"""TTS suite: seven dimensions of item sets, synthesizer runs, automatic metrics, studies."""
