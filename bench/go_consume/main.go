package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Drains a queue with Go's amqp091 client, as bench/queue_types.py's Python consumers do:
// prefetch PREFETCH, an ack with multiple=true every half prefetch. A client library that costs
// far less CPU per message than either broker, so the rate is the broker's.
//
// usage: goconsume URL QUEUE N PREFETCH
// Prints "rate <msg/s>" once N messages have arrived (timed from the first delivery's request),
// or "error <step>: <reason>" and exits 1.
func main() {
	url, queue := os.Args[1], os.Args[2]
	n, _ := strconv.Atoi(os.Args[3])
	prefetch, _ := strconv.Atoi(os.Args[4])
	conn, err := amqp.Dial(url)
	if err != nil {
		fail("dial", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		fail("channel", err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		fail("qos", err)
	}
	every := prefetch / 2
	if every < 1 {
		every = 1
	}
	start := time.Now()
	deliveries, err := ch.Consume(queue, "goconsume", false, false, false, false, nil)
	if err != nil {
		fail("consume", err)
	}
	got := 0
	timeout := time.After(300 * time.Second)
	for got < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				fail("consume", fmt.Errorf("channel closed after %d", got))
			}
			got++
			if got%every == 0 || got == n {
				if err := d.Ack(true); err != nil {
					fail("ack", err)
				}
			}
		case <-timeout:
			fail("consume", fmt.Errorf("timed out after %d", got))
		}
	}
	elapsed := time.Since(start).Seconds()
	fmt.Printf("rate %f\n", float64(got)/elapsed)
}

func fail(step string, err error) {
	fmt.Printf("error %s: %v\n", step, err)
	os.Exit(1)
}
