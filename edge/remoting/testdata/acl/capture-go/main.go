package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/edgemq/edgemq/edge"
	"github.com/edgemq/edgemq/edge/remoting"
	"github.com/edgemq/edgemq/edge/remoting/server"
)

func main() {
	dir, _ := os.MkdirTemp("", "cap")
	b, err := edge.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	pl, _ := net.Listen("tcp", "127.0.0.1:0")
	srv, err := server.Start(b, server.Options{Listen: "127.0.0.1:0", VIPListen: "off", Advertise: pl.Addr().String()})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	frames := map[int16][]byte{}
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			up, _ := net.Dial("tcp", srv.Addr().String())
			go io.Copy(c, up)
			go func() {
				for {
					var l [4]byte
					if _, err := io.ReadFull(c, l[:]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(l[:])
					f := make([]byte, 4+n)
					copy(f, l[:])
					if _, err := io.ReadFull(c, f[4:]); err != nil {
						return
					}
					cmd, err := remoting.NewReader(bytes.NewReader(f), 1<<24).Read()
					if err == nil {
						mu.Lock()
						if _, ok := frames[cmd.Code]; !ok {
							frames[cmd.Code] = f
						}
						mu.Unlock()
					}
					up.Write(f)
				}
			}()
		}
	}()
	tok := os.Getenv("TOKEN")
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{pl.Addr().String()}),
		producer.WithCredentials(primitive.Credentials{AccessKey: "RocketMQ", SecretKey: "12345678", SecurityToken: tok}),
		producer.WithGroupName("acl-pg"))
	if err != nil {
		panic(err)
	}
	p.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := p.SendSync(ctx, primitive.NewMessage("acl-topic", []byte("hello, acl")))
	fmt.Println(r, err)
	p.Shutdown()
	mu.Lock()
	for code, f := range frames {
		name := fmt.Sprintf("acl-go-%d%s.frame", code, map[bool]string{true: "-token"}[tok != ""])
		os.WriteFile(name, f, 0o644)
		fmt.Println(name)
	}
	mu.Unlock()
}
