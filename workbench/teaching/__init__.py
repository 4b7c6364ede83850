"""For workshops: the cached fine-tuned checkpoint (workshop), the notebooks' exercise checks
(exercises)."""
