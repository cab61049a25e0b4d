package store

// pendingAck is the acknowledgement of one AppendAsync batch waiting for the fsync that
// covers it.
type pendingAck struct {
	end  int64 // log position after the batch
	done func(error)
}

// queueAck queues the acknowledgement of a batch that ends at end. s.mu must be held, so that
// acknowledgements queue in log order.
func (s *Store) queueAck(end int64, done func(error)) {
	s.ackMu.Lock()
	s.acks = append(s.acks, pendingAck{end, done})
	s.ackMu.Unlock()
	select {
	case s.ackKick <- struct{}{}:
	default:
	}
}

// ackLoop is the acknowledgement goroutine of AppendAsync (sync flush policy): it waits for
// the fsync that covers the oldest queued batch, then acknowledges every queued batch that
// fsync (or a later one) covers, after their dispatch (dispatching them itself when the token
// is free, see dispatchTo), calling their done functions in log order. Batches queued after
// that fsync began wait for the next one without holding up those before them. After Close's
// flush it acknowledges what is left and exits.
func (s *Store) ackLoop() {
	defer s.wg.Done()
	var pend []pendingAck // taken from acks, in log order, not acknowledged yet
	for {
		s.ackMu.Lock()
		if len(pend) == 0 {
			pend, s.acks = s.acks, pend[:0] // swap the buffers, both to be reused
		} else {
			pend = append(pend, s.acks...)
			clear(s.acks)
			s.acks = s.acks[:0]
		}
		s.ackMu.Unlock()
		if len(pend) == 0 {
			select {
			case <-s.ackKick:
				continue
			case <-s.done:
				// Close waited for the append lock before closing done: every batch
				// written is queued by now.
				s.ackMu.Lock()
				left := len(s.acks)
				s.ackMu.Unlock()
				if left == 0 {
					return
				}
				continue
			}
		}
		err := s.log.WaitDurable(pend[0].end)
		n := len(pend) // acknowledged now: with an error, all of them
		if err == nil {
			durable := s.log.Durable()
			n = 1
			for n < len(pend) && pend[n].end <= durable {
				n++
			}
			s.dispatchTo(pend[n-1].end)
		}
		for _, a := range pend[:n] {
			a.done(err)
		}
		rest := copy(pend, pend[n:])
		clear(pend[rest:])
		pend = pend[:rest]
	}
}
