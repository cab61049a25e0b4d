package main

import "sync"

// runFloor measures the harness and platform floor of the latency workload: the same paced
// producer and probe with no broker, a message handed over two goroutines by channels (as
// EdgeMQ did, from Send to the store's dispatch goroutine to the parked puller, until a
// sender on a lightly loaded store dispatched its own message: one hand-off now).
func runFloor(j job) (result, error) {
	p := newProbe(j)
	in, out := make(chan []byte, 1024), make(chan []byte, 1024)
	var wg sync.WaitGroup
	wg.Go(func() { // the dispatcher
		for b := range in {
			out <- b
		}
		close(out)
	})
	wg.Go(func() { // the consumer
		for b := range out {
			p.recv(b, p.now())
		}
	})
	res, err := p.run(j, func(b []byte) error {
		in <- b
		return nil
	})
	close(in)
	wg.Wait()
	return res, err
}
