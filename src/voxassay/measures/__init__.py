"""Audio measures shared by suites: quality (DNSMOS, artifact detectors), prosody, speaker
embeddings. Heavy backends (onnxruntime, librosa, torch) are imported inside the function
that needs them."""
