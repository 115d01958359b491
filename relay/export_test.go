package relay

// LaneRunner runs a fire's target lanes (see laneRunner), for tests that
// schedule them.
type LaneRunner = laneRunner

// SetLaneRunner makes h run the target lanes of each fire's dispatch with
// a runner newRunner returns, one per dispatch, instead of goroutines.
func SetLaneRunner(h *Handler, newRunner func() LaneRunner) { h.newLanes = newRunner }
