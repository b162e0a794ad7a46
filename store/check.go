package store

import "context"

// Checker is an optional capability of an [IdempotencyStore] whose
// reservations can lapse (a shared store whose host was paused or cut off
// for longer than the lease): Check returns nil while the reservation of
// token still holds key, an error wrapping [ErrLostReservation] when
// another reservation, a record or nothing holds it, and any other error
// when the store cannot tell. The runtime checks an owned reservation just
// before its tool starts, so that a host that resumes after its lease ran
// out refuses the call rather than run it beside the execution that took
// the key over. A check may answer from what the store knows without
// asking its service, as long as the lease cannot have run out since it
// last heard the reservation was held. A store without it is never
// checked: its reservations last as long as their holder.
type Checker interface {
	Check(ctx context.Context, key Key, token string) error
}
