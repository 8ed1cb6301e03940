"""MyXTTS: XTTS-style text-to-speech training that keeps the GPU busy."""
__version__ = "0.1.0"
