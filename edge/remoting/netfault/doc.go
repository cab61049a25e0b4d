// Package netfault provides a TCP proxy that injects network faults, for tests of clients
// and servers that must survive a bad link, in the way package net/http/httptest provides
// test servers.
//
// A Proxy listens on a loopback address and forwards every connection it accepts to one
// upstream address, byte for byte in both directions. While it runs a test can:
//
//   - Cut: close every open connection now (the client sees a reset or EOF);
//   - Stall: stop forwarding in both directions for a while (bytes wait in the proxy);
//   - Throttle: forward at most so many bytes per second in each direction;
//   - DropNextReply: let the next request reach the upstream, then close that connection
//     at the first byte the upstream sends back, so the request takes effect and its
//     answer is lost;
//   - StartFaults: inject these faults at random moments from a seeded Schedule, so a
//     failing run can be replayed from its seed.
//
// The proxy knows nothing of the protocol it carries: a fault acts on bytes and
// connections, never on frames.
//
// Package netfault uses only the standard library and is meant for tests; nothing in a
// production program should depend on it.
package netfault
