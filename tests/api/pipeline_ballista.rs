//! The SQL UDF distributed by Ballista (feature `ballista`): a scheduler and two executors
//! started in this process on loopback, each executor with its own UDF rebuilt from the
//! serialized function (Ballista's supported way: the executor's function registry, which
//! decodes the UDF named in the physical plan it is sent); the query over a two-file Parquet
//! dataset (two partitions) must give the single-machine pipeline's predictions, computed by
//! the executors (the client's own instance computes no row). Bounded: every step has a
//! timeout and the runtime is shut down at the end.

use std::sync::Arc;
use std::time::Duration;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::ScalarUDF;
use datafusion::prelude::{ParquetReadOptions, SessionConfig};
use pfor::api::pipeline::sql::PforUdf;

use super::pipeline_sql::{
    assert_same_predictions, by_id, function_bytes, pipeline_predictions, runtime, write_dataset,
};

const LIMIT: Duration = Duration::from_secs(120);

/// A Ballista session state with `udf` registered.
fn state_with(udf: Arc<PforUdf>) -> datafusion::execution::SessionState {
    let config = SessionConfig::new_with_ballista().with_target_partitions(2);
    let state = SessionStateBuilder::new().with_default_features().with_config(config).build();
    let ctx = SessionContext::new_with_state(state);
    ctx.register_udf(ScalarUDF::new_from_shared_impl(udf));
    ctx.state()
}

#[test]
fn ballista_scheduler_and_two_executors_give_the_pipelines_predictions() {
    let (files, rows) = (2, 41);
    let dir = write_dataset("ballista", files, rows);
    let want = pipeline_predictions(&dir, files, rows);
    let bytes = function_bytes();
    let fresh = || Arc::new(PforUdf::from_bytes("predict", &bytes).unwrap());
    let (client_udf, executor_udfs) = (fresh(), [fresh(), fresh()]);
    let rt = runtime();
    let batches = rt.block_on(async {
        let scheduler_state = state_with(fresh());
        let addr = tokio::time::timeout(
            LIMIT,
            ballista_scheduler::standalone::new_standalone_scheduler_from_state(&scheduler_state),
        )
        .await
        .expect("scheduler start in time")
        .unwrap();
        let url = format!("http://localhost:{}", addr.port());
        for udf in &executor_udfs {
            let client = tokio::time::timeout(LIMIT, async {
                loop {
                    match SchedulerGrpcClient::connect(url.clone()).await {
                        Ok(c) => break c,
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            })
            .await
            .expect("executor reaches the scheduler in time");
            ballista_executor::new_standalone_executor_from_state(client, 1, &state_with(udf.clone())).await.unwrap();
        }
        let ctx = SessionContext::remote_with_state(
            &format!("df://localhost:{}", addr.port()),
            state_with(client_udf.clone()),
        )
        .await
        .unwrap();
        // `remote_with_state` keeps the state's configuration but not its function registry:
        // the client plans the SQL, so it needs the UDF by name too
        ctx.register_udf(ScalarUDF::new_from_shared_impl(client_udf.clone()));
        ctx.register_parquet("t", dir.to_str().unwrap(), ParquetReadOptions::default()).await.unwrap();
        let query = async { ctx.sql("SELECT id, predict(features) AS p FROM t").await?.collect().await };
        tokio::time::timeout(LIMIT, query).await.expect("query in time").unwrap()
    });
    rt.shutdown_timeout(Duration::from_secs(5));
    assert_same_predictions(&by_id(&batches), &want);
    let on_executors: Vec<u64> = executor_udfs.iter().map(|u| u.rows_computed()).collect();
    println!("rows computed per executor: {on_executors:?}");
    assert_eq!(on_executors.iter().sum::<u64>(), (files * rows) as u64, "every row computed on an executor");
    assert_eq!(client_udf.rows_computed(), 0, "none on the client");
    let _ = std::fs::remove_dir_all(&dir);
}
