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
// the fsync that covers the queued batches, for their dispatch (dispatching them itself when
// the token is free, see dispatchTo), and calls their done functions in log order. After
// Close's flush it acknowledges what is left and exits.
func (s *Store) ackLoop() {
	defer s.wg.Done()
	for {
		s.ackMu.Lock()
		batch := s.acks
		if len(batch) > 0 { // else both buffers stay, to be reused
			s.acks, s.ackSpare = s.ackSpare[:0], nil
		}
		s.ackMu.Unlock()
		if len(batch) == 0 {
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
		end := batch[len(batch)-1].end
		err := s.log.WaitDurable(end)
		if err == nil {
			s.dispatchTo(end)
		}
		for _, a := range batch {
			a.done(err)
		}
		clear(batch)
		s.ackMu.Lock()
		s.ackSpare = batch[:0]
		s.ackMu.Unlock()
	}
}
