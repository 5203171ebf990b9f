package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestIntegrationAMQPKill9 proves what the amqp sink promises: at least
// once, with a deterministic message_id per row. serve-source (the
// generator, which keeps no position: the amqp sink keeps no checkpoint
// either, so every restart of run replays the stream from its start),
// serve-sink
// (amqp://, publisher confirms) and run as three processes, a random one
// kill -9ed and restarted (3 times in make test, 100 under
// FLIGHTLINE_CHAOS=1); then a consumer written here with amqp091-go (not
// the sink's code) drains the durable queue, drops repeats by message_id
// as a consumer should, and must find every id exactly once; it also
// checks that a message_id always carries the same row, and that no row
// came under two message_ids (which dedup could not catch), and, where
// run was killed, that the replay published duplicates. The raw
// duplicates are counted and reported.
func TestIntegrationAMQPKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	broker := Need(t, "FLIGHTLINE_AMQP_URL", "RabbitMQ")
	u, err := url.Parse(broker)
	require.NoError(t, err)
	pass, _ := u.User.Password()
	t.Setenv("AMQP_PASSWORD", pass) // serve-sink reads it from there
	sinkURL := fmt.Sprintf("amqp://%s@%s%s", u.User.Username(), u.Host, u.Path)
	if u.Path == "" {
		sinkURL += "/"
	}
	queue := fmt.Sprintf("storekill_%d", rand.Int64())
	conn, err := amqp091.Dial(broker)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil) // durable; the default exchange routes by its name
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = ch.QueueDelete(queue, false, false, false) })

	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	kills := storeKills(t, 3)
	rows := int64(kills) * 2000
	bin := flightlineBin(t)
	srcAddr, sinkAddr := freePort(t), freePort(t)
	argv := map[string][]string{
		"source": {"serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=250&interval=20ms", rows)},
		"sink":   {"serve-sink", "--listen", sinkAddr, "--sink", sinkURL},
		"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr,
			"--stream", "orders", "--pipeline", "gen-amqp", "--target", queue},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	queued := func() int64 {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			return 0
		}
		return int64(q.Messages)
	}
	victims := killGeneratorRun(ctx, t, bin, argv, kills, seed, queued)
	killed := killTotal(victims)

	// Drain the queue, acknowledging as a consumer does.
	msgs, err := ch.Consume(queue, "", false, false, false, false, nil)
	require.NoError(t, err)
	byMsgID := map[string]int64{}           // message_id → the row's id
	msgIDsOf := map[int64]map[string]bool{} // row id → its message_ids
	raw := 0
	for idle := time.NewTimer(3 * time.Second); ; {
		select {
		case m := <-msgs:
			idle.Reset(3 * time.Second)
			raw++
			var row struct {
				ID *int64 `json:"id"`
			}
			require.NoError(t, json.Unmarshal(m.Body, &row), "%s", m.Body)
			require.NotNil(t, row.ID, "%s", m.Body)
			require.NotEmpty(t, m.MessageId, "every message has a message_id")
			if prev, ok := byMsgID[m.MessageId]; ok {
				require.Equal(t, prev, *row.ID, "message_id %s carried two different rows", m.MessageId)
			}
			byMsgID[m.MessageId] = *row.ID
			if msgIDsOf[*row.ID] == nil {
				msgIDsOf[*row.ID] = map[string]bool{}
			}
			msgIDsOf[*row.ID][m.MessageId] = true
			require.NoError(t, m.Ack(false))
			continue
		case <-idle.C:
		case <-ctx.Done():
			t.Fatal("draining the queue took too long")
		}
		break
	}
	// After dropping repeats by message_id: every id exactly once.
	seen := map[int64]int{}
	for _, id := range byMsgID {
		seen[id]++
	}
	var missing, doubled []int64
	for id := range rows {
		switch seen[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			doubled = append(doubled, id) // one row under several message_ids
		}
	}
	require.Empty(t, doubled[:min(len(doubled), 5)], "%d rows arrived under more than one message_id: dedup by message_id cannot drop them", len(doubled))
	require.Empty(t, missing[:min(len(missing), 5)], "%d rows never arrived: at-least-once broken", len(missing))
	require.Len(t, seen, int(rows), "ids outside [0, rows) arrived")
	// A restarted run asks the sink where to resume, and this sink keeps
	// no position, so the stream starts over: a kill of run after messages
	// were published (killGeneratorRun kills only after the queue grew)
	// must publish some again. A killed source or sink alone need not: the
	// surviving run resumes after the last batch the sink acked.
	if victims["run"] > 0 {
		require.Greater(t, raw, len(byMsgID), "run was killed %d times after messages were published, yet no message was published twice: did the sink keep a position it should not have?", victims["run"])
	}
	t.Logf("amqp: %d kills; %d messages delivered for %d rows: %d raw duplicates, all dropped by message_id; every row exactly once after dedup",
		killed, raw, rows, raw-len(byMsgID))
	appendChaosReport(t, []faultRow{{sink: "amqp", fault: "kill (generator source)", faults: killed, checked: int(rows), recovery: notMeasured}})
}
