"""The domain: one module per noun. Nothing here imports ``http.server``."""
