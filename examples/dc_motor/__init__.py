"""A conveyor axis driven by a DC motor (``plant.ConveyorAxis``) and its hand-written PID (``pid.AxisPID``):
a plant and a controller rlpilot did not write, used in docs/your-controller.md."""
