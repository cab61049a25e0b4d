package remoting

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/edgemq/edgemq/edge/mq"
)

// A topic stats body as RocketMQ's broker writes it (fastjson, a queue object as the key).
const javaTopicStats = `{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":1700000000000,"maxOffset":10,"minOffset":2},` +
	`{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}},"topicPutTps":0.0}`

func TestParseQueueTable(t *testing.T) {
	qa0 := mq.MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0}
	qa1 := mq.MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 1}
	for _, tc := range []struct {
		name, body string
		want       []queueEntry
		err        bool
	}{
		{"java topic stats", javaTopicStats, []queueEntry{
			{qa1, []byte(`{"lastUpdateTimestamp":1700000000000,"maxOffset":10,"minOffset":2}`)},
			{qa0, []byte(`{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}`)},
		}, false},
		{"numbers, spaces, consume tps first", "{\"consumeTps\":1.5, \"offsetTable\" :{ {\"topic\":\"T\",\"brokerName\":\"broker-a\",\"queueId\":\"1\"} : 7 }}", []queueEntry{{qa1, []byte(`7`)}}, false},
		{"empty table", `{"offsetTable":{}}`, nil, false},
		{"no table", `{"topicPutTps":0.0}`, nil, false},
		{"key as a string", `{"offsetTable":{"{\"topic\":\"T\",\"brokerName\":\"broker-a\",\"queueId\":0}":3}}`, []queueEntry{{qa0, []byte(`3`)}}, false},
		{"not an object", `[1]`, nil, true},
		{"table not an object", `{"offsetTable":[1]}`, nil, true},
		{"key not a queue", `{"offsetTable":{1:2}}`, nil, true},
		{"queue id not a number", `{"offsetTable":{{"topic":"T","queueId":"x"}:2}}`, nil, true},
		{"no colon", `{"offsetTable":{{"topic":"T","queueId":0} 2}}`, nil, true},
		{"cut", `{"offsetTable":{{"topic":"T","queueId":0}:{"maxOffset":`, nil, true},
		{"no separator", `{"offsetTable":{{"topic":"T","queueId":0}:1 {"topic":"T","queueId":1}:2}}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseQueueTable([]byte(tc.body), "offsetTable")
			if tc.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("got %v, %v; want an error wrapping ErrMalformed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d entries %v, want %v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i].queue != tc.want[i].queue || string(got[i].value) != string(tc.want[i].value) {
					t.Errorf("entry %d: got %v %s, want %v %s", i, got[i].queue, got[i].value, tc.want[i].queue, tc.want[i].value)
				}
			}
		})
	}
}

func FuzzParseQueueTable(f *testing.F) {
	f.Add([]byte(javaTopicStats))
	f.Add([]byte(`{"offsetTable":{"{\"topic\":\"T\",\"queueId\":0}":3}}`))
	f.Add([]byte(`{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":1}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := parseQueueTable(body, "offsetTable")
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// Each value is one whole JSON value.
		for _, e := range got {
			if !json.Valid(e.value) {
				t.Fatalf("entry %v: value %q is not JSON", e.queue, e.value)
			}
		}
	})
}
