"""rooflab: where GPU time goes, from first principles, on your own hardware."""
__version__ = "0.1.0"
