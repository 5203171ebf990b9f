//! Interop client for Flightline written from docs/protocol.md alone, with the
//! Rust `arrow-flight` crate.
//!
//!   flightline-interop sink URL PIPELINE TOKEN   push batches, read acks, resume
//!   flightline-interop source URL                read a stream after a checkpoint
//!
//! Prints a one-line JSON summary; exits non-zero on any contract violation.
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_flight::decode::DecodedPayload;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{Action, FlightClient, FlightDescriptor, Ticket};
use arrow_schema::{DataType, Field, Schema};
use base64::Engine;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};
use tonic::transport::Channel;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn fail(msg: String) -> ! {
    eprintln!("contract violation: {msg}");
    std::process::exit(1);
}

async fn connect(url: &str) -> Res<FlightClient> {
    let endpoint = url.replacen("grpc://", "http://", 1);
    let channel = Channel::from_shared(endpoint)?.connect().await?;
    Ok(FlightClient::new(channel))
}

fn cp_bytes(next: i64) -> Bytes {
    Bytes::from(format!("{{\"positions\":{{\"rs/0\":{next}}}}}"))
}

async fn last_checkpoint(client: &mut FlightClient, pipeline: &str) -> Res<Option<Bytes>> {
    let body = json!({"pipeline_id": pipeline, "target": "rs"}).to_string();
    let results: Vec<Bytes> = client
        .do_action(Action::new("checkpoint", body))
        .await?
        .try_collect()
        .await?;
    if results.len() > 1 {
        fail(format!("checkpoint action returned {} results", results.len()));
    }
    Ok(results.into_iter().next())
}

async fn push(client: &mut FlightClient, pipeline: &str, start: i64, end: i64, step: i64) -> Res<usize> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let mut batches = Vec::new();
    let mut cps = Vec::new();
    let mut first = start;
    while first < end {
        let ids: Vec<i64> = (first..first + step).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("r{i}")).collect();
        batches.push(RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(names))],
        )?);
        cps.push(cp_bytes(first + step));
        first += step;
    }
    let desc = FlightDescriptor::new_path(vec![pipeline.to_string(), "rs".to_string()]);
    let encoded: Vec<_> = FlightDataEncoderBuilder::new()
        .with_schema(schema.clone())
        .with_flight_descriptor(Some(desc))
        .build(futures::stream::iter(batches.into_iter().map(Ok)))
        .try_collect()
        .await?;
    // The first message is the schema; each later one is one batch (small
    // batches, no dictionaries): attach its checkpoint as app_metadata.
    if encoded.len() != cps.len() + 1 {
        fail(format!("encoder produced {} messages for {} batches", encoded.len(), cps.len()));
    }
    let msgs: Vec<_> = encoded
        .into_iter()
        .enumerate()
        .map(|(i, mut fd)| {
            if i > 0 {
                fd.app_metadata = cps[i - 1].clone();
            }
            Ok(fd)
        })
        .collect();
    let acks: Vec<_> = client.do_put(futures::stream::iter(msgs)).await?.try_collect().await?;
    if acks.len() != cps.len() {
        fail(format!("{} acks for {} batches", acks.len(), cps.len()));
    }
    for (ack, cp) in acks.iter().zip(cps.iter()) {
        if &ack.app_metadata != cp {
            fail(format!("ack {:?} != checkpoint {:?}", ack.app_metadata, cp));
        }
    }
    Ok(cps.len())
}

async fn sink(url: &str, pipeline: &str, token: &str) -> Res<Value> {
    let mut client = connect(url).await?;
    client.add_header("authorization", &format!("Bearer {token}"))?;
    if last_checkpoint(&mut client, pipeline).await?.is_some() {
        fail("fresh pipeline has a checkpoint".into());
    }
    let n1 = push(&mut client, pipeline, 0, 400, 100).await?;
    let cp = last_checkpoint(&mut client, pipeline)
        .await?
        .unwrap_or_else(|| fail("no checkpoint after commits".into()));
    let parsed: Value = serde_json::from_slice(&cp)?;
    let start = parsed["positions"]["rs/0"].as_i64().unwrap_or_else(|| fail(format!("bad checkpoint {parsed}")));
    let n2 = push(&mut client, pipeline, start, start + 600, 200).await?;
    let replay = push(&mut client, pipeline, 800, 1000, 200).await?;
    let cp = last_checkpoint(&mut client, pipeline).await?;
    if cp != Some(cp_bytes(1000)) {
        fail(format!("checkpoint after replay is {cp:?}"));
    }
    let mut bad = connect(url).await?;
    bad.add_header("authorization", "Bearer wrong")?;
    let code = match last_checkpoint(&mut bad, pipeline).await {
        Ok(_) => fail("wrong token accepted".into()),
        Err(e) => match e.downcast_ref::<arrow_flight::error::FlightError>() {
            Some(arrow_flight::error::FlightError::Tonic(s)) => format!("{:?}", s.code()),
            _ => format!("{e}"),
        },
    };
    Ok(json!({"batches_1": n1, "batches_2": n2, "replay": replay, "wrong_token": code}))
}

async fn source(url: &str) -> Res<Value> {
    let mut client = connect(url).await?;
    let cp = b"{\"positions\":{\"orders/0\":3000}}";
    let ticket = json!({"stream": "orders", "pipeline_id": "rs",
        "checkpoint": base64::engine::general_purpose::STANDARD.encode(cp)}).to_string();
    let mut stream = client.do_get(Ticket::new(ticket)).await?.into_inner();
    let (mut expect, mut rows, mut last) = (3000i64, 0i64, Value::Null);
    while let Some(msg) = stream.next().await {
        let msg = msg?;
        if let DecodedPayload::RecordBatch(batch) = msg.payload {
            if batch.num_rows() == 0 {
                continue; // heartbeat
            }
            let ids = batch.column_by_name("id").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
            for i in 0..ids.len() {
                if ids.value(i) != expect {
                    fail(format!("id {} where {} was expected", ids.value(i), expect));
                }
                expect += 1;
            }
            rows += batch.num_rows() as i64;
            last = serde_json::from_slice(&msg.inner.app_metadata)?;
            if last["positions"]["orders/0"].as_i64() != Some(expect) {
                fail(format!("checkpoint {last} after id {}", expect - 1));
            }
        }
    }
    Ok(json!({"rows": rows, "last_checkpoint": last}))
}

#[tokio::main]
async fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let out = match args.get(1).map(String::as_str) {
        Some("sink") if args.len() == 5 => sink(&args[2], &args[3], &args[4]).await?,
        Some("source") if args.len() == 3 => source(&args[2]).await?,
        _ => {
            eprintln!("usage: flightline-interop sink URL PIPELINE TOKEN | source URL");
            std::process::exit(2);
        }
    };
    println!("{out}");
    Ok(())
}
