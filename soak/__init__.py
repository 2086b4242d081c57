"""The long reliability campaign (`make soak`, `python -m soak.run`)."""
