//! The operation-run planner (to be written).
