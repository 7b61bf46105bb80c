"""The planner's four models, one module each: movement, registers, schedule, sync."""
