//! Hostile input over the wire (issue 14, item 6), on both stores: every
//! unary RPC of `v1.Flow` and `v1.FlowExtensions` gets random messages
//! (built from the compiled descriptors: any field, any value — empty,
//! huge, NUL, unicode, extreme numbers, unknown enum values, nested to
//! depth 4) and mutations of valid requests. No answer may be INTERNAL or
//! UNKNOWN (input the client controls is never the server's fault), the
//! server must keep answering, and a refused mutating request must write
//! nothing the API can see.
//!
//! Bounded for CI: `RACKFLOW_FUZZ_CASES` per RPC (default 12), seed
//! `RACKFLOW_FUZZ_SEED` (default fixed; printed on failure, so a failure
//! reproduces).

use std::time::Duration;

use prost::Message;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, ReflectMessage, Value,
};
use rackflow_api::v1 as pb;
use rackflow_testkit::both_stores;
use rackflow_testkit::{Backend, TestServer, fixture_fleet, fixture_id, rack, run_request};
use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

both_stores!(random_and_mutated_requests_never_answer_internal_or_write_when_refused);

/// A small deterministic generator (xorshift64*): the test needs no
/// randomness crate and reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn text(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => String::new(),
        1 => "x".into(),
        2 => fixture_id(1 + rng.below(2) as u32).to_string(),
        3 => uuid::Uuid::from_u64_pair(rng.next(), rng.next()).to_string(),
        4 => format!("r-{:04}", rng.below(4)),
        5 => "é✓\u{1F680}名".into(),
        6 => "n".repeat(200 + rng.below(3000) as usize),
        7 => format!("a\0b{}", rng.below(10)),
        8 => "{\"compute\": \"2.0.0\"".into(),
        9 => "-1".into(),
        10 => "../../etc/passwd".into(),
        _ => format!("v{}", rng.below(1000)),
    }
}

fn scalar(kind: &Kind, rng: &mut Rng) -> Value {
    let pick_i64 = |rng: &mut Rng| match rng.below(6) {
        0 => 0,
        1 => 1,
        2 => -1,
        3 => i64::MAX,
        4 => i64::MIN,
        _ => rng.next() as i64 % 100_000,
    };
    match kind {
        Kind::String => Value::String(text(rng)),
        Kind::Bytes => Value::Bytes(text(rng).into_bytes().into()),
        Kind::Bool => Value::Bool(rng.chance(50)),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(pick_i64(rng) as i32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(pick_i64(rng)),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(pick_i64(rng) as u32),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(pick_i64(rng) as u64),
        Kind::Float => Value::F32(pick_i64(rng) as f32),
        Kind::Double => Value::F64(pick_i64(rng) as f64),
        Kind::Enum(e) => {
            let values: Vec<i32> = e.values().map(|v| v.number()).collect();
            if rng.chance(80) && !values.is_empty() {
                Value::EnumNumber(values[rng.below(values.len() as u64) as usize])
            } else {
                Value::EnumNumber(rng.next() as i32 % 50)
            }
        }
        Kind::Message(m) => Value::Message(random_message(m, rng, 2)),
    }
}

fn value(field: &FieldDescriptor, rng: &mut Rng, depth: u32) -> Value {
    let one = |rng: &mut Rng| match field.kind() {
        Kind::Message(m) => Value::Message(random_message(&m, rng, depth + 1)),
        kind => scalar(&kind, rng),
    };
    if field.is_list() {
        let n = rng.below(4);
        Value::List((0..n).map(|_| one(rng)).collect())
    } else if field.is_map() {
        Value::Map(Default::default())
    } else {
        one(rng)
    }
}

fn random_message(descriptor: &MessageDescriptor, rng: &mut Rng, depth: u32) -> DynamicMessage {
    let mut message = DynamicMessage::new(descriptor.clone());
    if depth > 4 {
        return message;
    }
    for field in descriptor.fields() {
        if rng.chance(55) {
            let v = value(&field, rng, depth);
            // A value the field cannot hold is skipped, not sent.
            let _ = message.try_set_field(&field, v);
        }
    }
    message
}

/// A valid request mutated in one field.
fn mutated(valid: &DynamicMessage, rng: &mut Rng) -> DynamicMessage {
    let mut message = valid.clone();
    let fields: Vec<FieldDescriptor> = message.descriptor().fields().collect();
    if let Some(field) = fields.get(rng.below(fields.len() as u64) as usize) {
        let v = value(field, rng, 1);
        let _ = message.try_set_field(field, v);
    }
    message
}

/// Valid requests of a few RPCs, to mutate.
fn valid_requests(pool: &DescriptorPool) -> Vec<(String, DynamicMessage)> {
    let dynamic = |name: &str, bytes: Vec<u8>| {
        let descriptor = pool.get_message_by_name(name).expect("message");
        DynamicMessage::decode(descriptor, bytes.as_slice()).expect("decode")
    };
    vec![
        (
            "/v1.Flow/CreateOperationRun".into(),
            dynamic(
                "v1.CreateOperationRunRequest",
                run_request("fz", 100, "s", "o", 2).encode_to_vec(),
            ),
        ),
        (
            "/v1.FlowExtensions/PreviewOperationRun".into(),
            dynamic(
                "v1.CreateOperationRunRequest",
                run_request("fz", 50, "s", "o", 1).encode_to_vec(),
            ),
        ),
        (
            "/v1.Flow/CreateExpectedRack".into(),
            dynamic(
                "v1.CreateExpectedRackRequest",
                pb::CreateExpectedRackRequest {
                    rack: Some(rack(9, None, 2)),
                }
                .encode_to_vec(),
            ),
        ),
    ]
}

async fn call(channel: &Channel, path: &str, message: DynamicMessage) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("ready");
    let sent = grpc.unary(
        tonic::Request::new(message),
        PathAndQuery::try_from(path).expect("path"),
        tonic_prost::ProstCodec::<DynamicMessage, ()>::default(),
    );
    match tokio::time::timeout(Duration::from_secs(30), sent).await {
        Ok(Ok(_)) => tonic::Status::ok(""),
        Ok(Err(status)) => status,
        Err(_) => panic!("{path}: no answer in 30 s"),
    }
}

/// What the API shows of every store table a request could write.
async fn visible_state(client: &mut rackflow_testkit::FlowClient<Channel>) -> [i64; 4] {
    let racks = client
        .get_list_of_racks(pb::GetListOfRacksRequest::default())
        .await
        .expect("racks")
        .into_inner()
        .total;
    let runs = client
        .list_operation_runs(pb::ListOperationRunsRequest::default())
        .await
        .expect("runs")
        .into_inner()
        .total;
    let rules = client
        .list_operation_rules(pb::ListOperationRulesRequest::default())
        .await
        .expect("rules")
        .into_inner()
        .total_count;
    let schedules = client
        .list_task_schedules(pb::ListTaskSchedulesRequest::default())
        .await
        .expect("schedules")
        .into_inner()
        .total;
    [
        i64::from(racks),
        i64::from(runs),
        i64::from(rules),
        i64::from(schedules),
    ]
}

async fn random_and_mutated_requests_never_answer_internal_or_write_when_refused(backend: Backend) {
    let cases: u64 = std::env::var("RACKFLOW_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("RACKFLOW_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_F022);
    let mut config = rackflow_server::Config::default();
    config.dispatcher.enabled = false;
    config.schedules.enabled = false;
    config.sim.firmware_update_ms = 20;
    config.sim.power_ms = 5;
    let Some(mut server) = TestServer::start_with(backend, config).await else {
        return;
    };
    fixture_fleet(&mut server.client, 2).await;
    let channel = Channel::from_shared(format!("http://{}", server.addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let pool = DescriptorPool::decode(rackflow_api::FILE_DESCRIPTOR_SET).expect("descriptors");
    let mut rng = Rng(seed | 1);
    let mut rpcs = Vec::new();
    for service in ["v1.Flow", "v1.FlowExtensions"] {
        let service = pool.get_service_by_name(service).expect("service");
        for method in service.methods() {
            if !method.is_client_streaming() && !method.is_server_streaming() {
                rpcs.push((
                    format!("/{}/{}", service.full_name(), method.name()),
                    method.input(),
                    rackflow_security::authz::required_role(&format!(
                        "/{}/{}",
                        service.full_name(),
                        method.name()
                    )) != rackflow_security::Role::Viewer,
                ));
            }
        }
    }
    assert!(rpcs.len() > 45, "{}", rpcs.len());
    let valid = valid_requests(&pool);
    let mut answered = 0usize;
    for (path, input, mutating) in &rpcs {
        for case in 0..cases {
            let message = match valid.iter().find(|(p, _)| p == path) {
                Some((_, v)) if case % 2 == 0 => mutated(v, &mut rng),
                _ => random_message(input, &mut rng, 0),
            };
            let shown = format!("{message:?}");
            let before = if *mutating {
                Some(visible_state(&mut server.client).await)
            } else {
                None
            };
            let status = call(&channel, path, message).await;
            assert!(
                !matches!(status.code(), Code::Internal | Code::Unknown),
                "seed {seed} case {case}: {path} answered {status:?} to {}",
                &shown[..shown.len().min(2000)]
            );
            if let Some(before) = before
                && status.code() != Code::Ok
            {
                let after = visible_state(&mut server.client).await;
                assert_eq!(
                    before, after,
                    "seed {seed} case {case}: {path} was refused ({status:?}) but wrote"
                );
            }
            answered += 1;
        }
    }
    eprintln!("{answered} requests over {} RPCs, seed {seed}", rpcs.len());
    server.stop().await;
}
