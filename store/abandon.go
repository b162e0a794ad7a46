package store

// ReservationAbandoner is an optional capability of an [IdempotencyStore]
// whose reservations have a lease that it renews while their holder lives:
// AbandonReservation stops renewing the reservation of token without
// ending it, as the death of its holder would, so that the key frees
// itself when the lease runs out. A registry that closes while an outcome
// still waits to be recorded (its store out of reach) abandons the
// reservation, rather than renew it for ever; the storetest package uses
// it to check that the reservation of a holder that died frees its key. A
// store whose reservations last as long as their process (the in-memory
// one) has no lease to lapse and does not implement it.
type ReservationAbandoner interface {
	AbandonReservation(key Key, token string)
}
