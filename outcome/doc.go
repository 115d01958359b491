// Package outcome delivers the terminal outcomes of the reference
// domain's reservations (package refdomain): Append queues one in a
// partition's outbox as its reservation becomes terminal, and Ack plans
// its acknowledgment once delivered. The rows it queues are the library's
// (gen.OutcomePendingKey, the backlog, the outcome-delivery timer); the
// records it reads and rewrites are the domain's (refdomain.ReservationKey).
package outcome
