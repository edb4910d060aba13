"""Speech understanding suite: emotion, relative emotion, speaker match, synthetic speech."""
