package remoting

import (
	"errors"
	"reflect"
	"testing"
)

func FuzzDecodeRoute(f *testing.F) {
	f.Add([]byte(goldenRoute))
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.5:10911",1:"x"},"brokerName":"a"}],"queueDatas":[]}`))
	f.Add([]byte(`{"brokerDatas":[{"cluster":"{0:x}, 1:","brokerName":"[2:y]","brokerAddrs":{-1:"a",7:"b,c"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRoute(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		back, err := DecodeRoute(EncodeRoute(r))
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, back, err)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte(goHeartbeat))
	f.Add([]byte(javaHeartbeat))
	f.Add([]byte(`{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","tagsSet":["A"],"subVersion":"5"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		hd, err := DecodeHeartbeatData(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		back, err := DecodeHeartbeatData(hd.Encode())
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		// Encode writes the TAG default and empty tag sets; compare what mq keeps.
		if !reflect.DeepEqual(back.Heartbeat(), hd.Heartbeat()) {
			t.Fatalf("round trip: %+v, want %+v", back.Heartbeat(), hd.Heartbeat())
		}
		hb := hd.Heartbeat()
		if _, err := DecodeHeartbeat(EncodeHeartbeat(hb)); err != nil {
			t.Fatalf("EncodeHeartbeat output: %v", err)
		}
	})
}

func FuzzDecodeLockRequest(f *testing.F) {
	f.Add([]byte(`{"consumerGroup":"cg","clientId":"c","onlyThisBroker":true,"mqSet":[{"topic":"T","brokerName":"b","queueId":3}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeLockRequest(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		back, err := DecodeLockRequest(EncodeLockRequest(r))
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, back, err)
		}
	})
}

func FuzzDecodeLockReply(f *testing.F) {
	f.Add([]byte(`{"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":3}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		qs, err := DecodeLockReply(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		back, err := DecodeLockReply(EncodeLockReply(qs))
		if err != nil || !reflect.DeepEqual(back, qs) {
			t.Fatalf("round trip of %+v: %+v, %v", qs, back, err)
		}
	})
}

func FuzzDecodeConsumerList(f *testing.F) {
	f.Add([]byte(`{"consumerIdList":["10.0.0.1@1","x"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ids, err := DecodeConsumerList(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		back, err := DecodeConsumerList(EncodeConsumerList(ids))
		if err != nil || len(back) != len(ids) {
			t.Fatalf("round trip of %q: %q, %v", ids, back, err)
		}
		for i := range ids {
			if back[i] != ids[i] {
				t.Fatalf("round trip of %q: %q", ids, back)
			}
		}
	})
}
