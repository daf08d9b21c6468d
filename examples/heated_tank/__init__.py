"""A heated tank, first order plus dead time (``plant.HeatedTank``), and its discrete PID with SIMC tuning
(``pid.TankPID``): a process plant that declares its conditions and measures (docs/conditions.md)."""
