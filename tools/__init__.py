"""Local tools that never ship in the Lambda artifact: the emulator and the demo."""
