package timers

// StartListingsAt makes every listing of s start at bucket b.
func StartListingsAt(s *Scheduler, b int) { s.firstBucket = func(int) int { return b } }
