"""Speed figures taken one way: the machine profile (machine_profile), work and floor (work),
side-by-side timing (speed), scoring speed (scoring), GPU peers (gpu_peers)."""
