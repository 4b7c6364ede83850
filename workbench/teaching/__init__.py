"""For workshops: the cached fine-tuned checkpoint (workshop), the notebooks' exercise checks
(exercises), the instructor's answer key (answers, which no notebook imports) and the hour's agenda
(agenda)."""
