package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// The latency floor (workload floor_lat, run with the edgemq-* kinds): the latency
// workload's pacer and probe over a bare TCP echo between two processes placed as a broker
// and its clients are, with no broker. A message of the latency workloads crosses from the
// client process to the broker's and back, as the echo's does; what the floor reads is what
// this machine's loopback, scheduler and wake-ups cost those two hops, and what a broker
// and its client add is the difference.

// floorLabel labels the floor's row in the tables.
const floorLabel = "↳ floor: the same pacer and probe over a bare TCP echo between two processes placed as the broker and the clients, no broker: p50 / p99 / p99.9 / max"

// floorEchoCPULabel and floorClientCPULabel label the floor's CPU rows: what a message
// costs the echo process (placed as the broker) and this process without a broker.
const (
	floorEchoCPULabel   = "↳↳ the echo process's CPU per message"
	floorClientCPULabel = "↳↳ the benchmark process's CPU per message (pacer, writes and reads)"
)

// echoServeFlag makes this program the floor's echo process: it listens on the address
// given, prints the address it listens on as its first line of output, and writes back
// every byte each connection sends until it is killed.
const echoServeFlag = "echo-serve"

// serveEcho is the echo process's main.
func serveEcho(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	for {
		nc, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer nc.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := nc.Read(buf)
				if n > 0 {
					if _, werr := nc.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// floorLatency runs the latency workload over an echo process started on the broker's
// CPUs (c.pinBroker): figures under floor_lat_, the echo process's CPU as a broker's
// (floor_lat_cpu_us).
func floorLatency(ctx context.Context, c config, p params, m metrics) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := pinned(c.pinBroker, exe, "-"+echoServeFlag, "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the echo process: %w", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("the echo process's address: %w", err)
	}
	nc, err := net.DialTimeout("tcp", strings.TrimSpace(line), 10*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	size := max(p.size, 16) // latencyRun's body
	var wmu sync.Mutex
	write := func(body []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := nc.Write(body)
		return err
	}
	lc := latClient{
		consume: func(_ string, recv func([]byte)) (func(), error) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, size)
				for {
					if _, err := io.ReadFull(nc, buf); err != nil {
						return
					}
					recv(buf)
				}
			}()
			return func() {
				nc.SetReadDeadline(time.Now())
				<-done
			}, nil
		},
		send: func(_ context.Context, _ string, body []byte) error { return write(body) },
		sendAsync: func(_ context.Context, _ string, body []byte, done func(error)) error {
			if err := write(body); err != nil {
				return err
			}
			done(nil) // written: the echo is the message's only way
			return nil
		},
	}
	return latencyRun(ctx, &broker{pid: cmd.Process.Pid}, lc, "", p, m, "floor_lat")
}
