//! Racks, components and BMCs: the inventory half of [`crate::Store`],
//! written once for any [`Backend`].
//!
//! Conventions (both dialects):
//! - empty optional text (`Some("")`) is stored as NULL and read back as
//!   `None`;
//! - BMC MAC addresses are stored normalised ([`normalize_mac`]; text that is
//!   not a MAC is stored trimmed and lowercased), and lookups normalise too;
//! - a component's BMCs come back ordered by MAC;
//! - components list in the order rack id (unassigned last), type name,
//!   slot, tray, name, id.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rackflow_domain::ComponentType;
use rackflow_domain::inventory::{
    Bmc, BmcType, Component, LeakObservation, LeakStatus, LifecycleStatus, NvlDomain, Observation,
    OperationalState, OperationalStatus, Position, Rack, RackLifecycle, normalize_mac,
};
use rackflow_domain::run::Page;
use uuid::Uuid;

use crate::backend::{Backend, Txn, fetch_count, text_condition};
use crate::sql::{
    Conditions, ID_CHUNK, RowReader, Sql, UniqueKey, non_empty, now, opt_non_empty, to_json,
    write_error,
};
use crate::tasks::UNFINISHED;
use crate::{
    ComponentFilterQuery, ComponentPatch, ListOrder, PurgeOutcome, RackFilter, RackImport,
    RackPatch, StoreError, StoreResult, TextFilter,
};

/// The columns a new rack row is written with (its lifecycle starts at the
/// columns' defaults: `new`).
const RACK_INSERT_COLUMNS: &str = "id, name, manufacturer, serial_number, model, description, \
     location, external_id, nvldomain_id, created_at, updated_at, deleted_at";

const RACK_COLUMNS: &str = "id, name, manufacturer, serial_number, model, description, location, \
     external_id, nvldomain_id, created_at, updated_at, deleted_at, status, ingested_at, \
     decommissioned_at";

/// The columns a new component row is written with (the observation
/// times start NULL: an imported value is not an observed one).
const COMPONENT_INSERT_COLUMNS: &str = "id, rack_id, type, name, manufacturer, model, \
     serial_number, description, firmware_version, slot_id, tray_index, host_id, external_id, \
     power_state, operational_state, operational_reason, created_at, updated_at, deleted_at";

const COMPONENT_COLUMNS: &str = "id, rack_id, type, name, manufacturer, model, serial_number, \
     description, firmware_version, slot_id, tray_index, host_id, external_id, power_state, \
     created_at, updated_at, deleted_at, firmware_observed_at, power_observed_at, \
     operational_state, operational_reason, leak_status, leak_observed_at";

/// Unassigned components (NULL rack) sort last in both dialects; PostgreSQL
/// alone would put NULLs last and SQLite first.
const COMPONENT_ORDER: &str = "(rack_id IS NULL), rack_id, type, slot_id, tray_index, name, id";

const NVL_DOMAIN_COLUMNS: &str =
    "id, name, external_id, nmxc_cluster_id, created_at, updated_at, deleted_at";

/// Adds the conditions of a listing's text filters (each AND'ed).
fn add_text_filters<B: Backend>(cond: &mut Conditions, filters: &[TextFilter]) {
    for filter in filters {
        if let Some(c) = text_condition::<B>(&mut cond.sql, filter.column.column(), &filter.query) {
            cond.add(c);
        }
    }
}

/// `ORDER BY` text of a listing's explicit order: the column, then id (so
/// pages are stable), NULLs first in both dialects as SQLite has them.
fn order_clause(order: ListOrder) -> String {
    let column = order.column.column();
    let direction = if order.descending { "DESC" } else { "ASC" };
    // PostgreSQL puts NULLs last ascending; `(col IS NOT NULL)` sorts them
    // first in both dialects (and last descending, as SQLite does).
    format!("({column} IS NOT NULL) {direction}, {column} {direction}, id ASC")
}

fn nvl_domain_from_row(row: &impl RowReader) -> StoreResult<NvlDomain> {
    Ok(NvlDomain {
        id: row.uuid("id")?,
        name: row.opt_text("name")?,
        external_id: row.opt_text("external_id")?,
        nmxc_cluster_id: row.opt_text("nmxc_cluster_id")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        deleted_at: row.opt_ts("deleted_at")?,
    })
}

fn rack_from_row(row: &impl RowReader) -> StoreResult<Rack> {
    Ok(Rack {
        id: row.uuid("id")?,
        name: row.text("name")?,
        manufacturer: row.text("manufacturer")?,
        model: row.opt_text("model")?,
        serial_number: row.text("serial_number")?,
        description: row.opt_text("description")?,
        location: row.json("location")?,
        external_id: row.opt_text("external_id")?,
        nvl_domain_id: row.opt_uuid("nvldomain_id")?,
        lifecycle: RackLifecycle {
            status: {
                let text = row.text("status")?;
                LifecycleStatus::parse(&text).ok_or_else(|| StoreError::Decode {
                    what: "rack.status",
                    detail: format!("unknown lifecycle status {text:?}"),
                })?
            },
            ingested_at: row.opt_ts("ingested_at")?,
            decommissioned_at: row.opt_ts("decommissioned_at")?,
        },
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        deleted_at: row.opt_ts("deleted_at")?,
    })
}

/// A component row without its BMCs (see [`with_bmcs`]).
fn component_from_row(row: &impl RowReader) -> StoreResult<Component> {
    Ok(Component {
        id: row.uuid("id")?,
        rack_id: row.opt_uuid("rack_id")?,
        component_type: component_type_from_db(&row.text("type")?)?,
        name: row.text("name")?,
        manufacturer: row.text("manufacturer")?,
        model: row.opt_text("model")?,
        serial_number: row.text("serial_number")?,
        description: row.opt_text("description")?,
        firmware_version: row.text("firmware_version")?,
        position: Position {
            slot_id: row.i32("slot_id")?,
            tray_idx: row.i32("tray_index")?,
            host_id: row.i32("host_id")?,
        },
        bmcs: Vec::new(),
        external_id: row.opt_text("external_id")?,
        power_state: row.opt_text("power_state")?,
        firmware_observed_at: row.opt_ts("firmware_observed_at")?,
        power_observed_at: row.opt_ts("power_observed_at")?,
        operational: operational_from_row(row)?,
        leak: leak_from_row(row)?,
        // Derived from the leak tasks when read (see InventoryManager).
        leak_handling: None,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        deleted_at: row.opt_ts("deleted_at")?,
    })
}

/// `component.leak_status` of a component no source reported on.
const UNKNOWN_LEAK_STATUS: &str = "unknown";

fn leak_from_row(row: &impl RowReader) -> StoreResult<Option<LeakObservation>> {
    let Some(observed_at) = row.opt_ts("leak_observed_at")? else {
        return Ok(None);
    };
    let text = row.text("leak_status")?;
    let status = LeakStatus::parse(&text).ok_or_else(|| StoreError::Decode {
        what: "component.leak_status",
        detail: format!("unknown leak status {text:?}"),
    })?;
    Ok(Some(LeakObservation {
        status,
        observed_at,
    }))
}

fn operational_from_row(row: &impl RowReader) -> StoreResult<Option<OperationalStatus>> {
    let Some(state) = row.opt_text("operational_state")? else {
        return Ok(None);
    };
    let state = OperationalState::parse(&state).ok_or_else(|| StoreError::Decode {
        what: "component.operational_state",
        detail: format!("unknown operational state {state:?}"),
    })?;
    Ok(Some(OperationalStatus {
        state,
        reason: row.opt_text("operational_reason")?.unwrap_or_default(),
    }))
}

/// Storage name of a component type back to the type; `Unknown` included
/// (the domain's `parse` refuses it as user input, but it is storable).
fn component_type_from_db(name: &str) -> StoreResult<ComponentType> {
    if name == ComponentType::Unknown.name() {
        return Ok(ComponentType::Unknown);
    }
    ComponentType::parse(name).ok_or_else(|| StoreError::Decode {
        what: "component.type",
        detail: format!("unknown component type {name:?}"),
    })
}

/// The stored form of a MAC address.
fn mac_key(mac: &str) -> String {
    normalize_mac(mac).unwrap_or_else(|| mac.trim().to_ascii_lowercase())
}

/// Sorted, de-duplicated ids. Chunks of a sorted list cover disjoint id
/// ranges, so per-chunk queries ordered by id concatenate in id order.
fn sorted_ids(ids: &[Uuid]) -> Vec<Uuid> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids.dedup();
    ids
}

async fn fetch_racks<B: Backend>(backend: &B, sql: Sql) -> StoreResult<Vec<Rack>> {
    let rows = backend.fetch_all(sql).await?;
    rows.iter().map(rack_from_row).collect()
}

/// Components of a query, with their BMCs.
async fn fetch_components<B: Backend>(backend: &B, sql: Sql) -> StoreResult<Vec<Component>> {
    let rows = backend.fetch_all(sql).await?;
    let components = rows
        .iter()
        .map(component_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    with_bmcs(backend, components).await
}

/// Loads the BMCs of `components` (a query per [`ID_CHUNK`] components).
async fn with_bmcs<B: Backend>(
    backend: &B,
    mut components: Vec<Component>,
) -> StoreResult<Vec<Component>> {
    let mut by_component: HashMap<Uuid, Vec<Bmc>> = HashMap::new();
    let ids: Vec<Uuid> = components.iter().map(|c| c.id).collect();
    for chunk in ids.chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT mac_address, type, component_id, ip_address FROM bmc \
             WHERE component_id IN {list} ORDER BY mac_address"
        ));
        for row in backend.fetch_all(sql).await? {
            let type_name = row.text("type")?;
            let bmc_type = BmcType::parse(&type_name).ok_or_else(|| StoreError::Decode {
                what: "bmc.type",
                detail: format!("unknown BMC type {type_name:?}"),
            })?;
            by_component
                .entry(row.uuid("component_id")?)
                .or_default()
                .push(Bmc {
                    bmc_type,
                    mac_address: row.text("mac_address")?,
                    ip_address: row.opt_text("ip_address")?,
                });
        }
    }
    for component in &mut components {
        component.bmcs = by_component.remove(&component.id).unwrap_or_default();
    }
    Ok(components)
}

pub(crate) async fn rack_create<B: Backend>(
    backend: &B,
    rack: &Rack,
    components: &[Component],
) -> StoreResult<()> {
    let now = now();
    let mut insert = Sql::new(format!("INSERT INTO rack ({RACK_INSERT_COLUMNS}) VALUES "));
    let row = rack_row(&mut insert, rack, now)?;
    insert.push(&row);
    let mut tx = backend.begin().await?;
    tx.execute(insert).await.map_err(|e| {
        write_error(
            e,
            |key| match key {
                Some(UniqueKey::RackExternalId) => format!(
                    "rack external_id {:?}",
                    rack.external_id.as_deref().unwrap_or_default()
                ),
                Some(UniqueKey::RackManufacturerSerial) => format!(
                    "rack manufacturer {:?} serial_number {:?}",
                    rack.manufacturer, rack.serial_number
                ),
                _ => format!("rack id \"{}\"", rack.id),
            },
            || "referenced row".to_string(),
        )
    })?;
    for component in components {
        // The components of a rack belong to it, whatever their own field says.
        insert_component(&mut tx, component, Some(rack.id), now).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Rows per multi-row `INSERT`: about 1,000 arguments per statement, few
/// round trips per batch with statements of moderate size.
const RACK_INSERT_CHUNK: usize = 100; // 10 arguments each
const COMPONENT_INSERT_CHUNK: usize = 64; // 15 arguments each
const BMC_INSERT_CHUNK: usize = 250; // 4 arguments each

/// [`crate::Store::racks_import`]: one transaction, the existing racks found
/// with one query per [`ID_CHUNK`] external ids, the new rows written with
/// multi-row inserts. A write error (a duplicate serial, component external
/// id or MAC) rolls the batch back, and the batch is then created rack by
/// rack so that the error names the rack that broke it.
pub(crate) async fn racks_import<B: Backend>(
    backend: &B,
    racks: &[(Rack, Vec<Component>)],
) -> StoreResult<Vec<RackImport>> {
    let mut outcome = Vec::with_capacity(racks.len());
    let mut tx = backend.begin().await?;
    let external_ids: Vec<&str> = racks
        .iter()
        .filter_map(|(r, _)| r.external_id.as_deref().filter(|e| !e.is_empty()))
        .collect();
    let mut known: HashMap<String, Uuid> = HashMap::new();
    for chunk in external_ids.chunks(ID_CHUNK) {
        let mut sql = Sql::new(
            "SELECT id, external_id FROM rack WHERE deleted_at IS NULL AND external_id IN ",
        );
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&list);
        for row in tx.fetch_all(sql).await? {
            known.insert(row.text("external_id")?, row.uuid("id")?);
        }
    }
    let mut new: Vec<&(Rack, Vec<Component>)> = Vec::new();
    for entry in racks {
        let external_id = entry.0.external_id.as_deref().filter(|e| !e.is_empty());
        match external_id.and_then(|e| known.get(e)) {
            Some(id) => outcome.push(RackImport::Existing(*id)),
            None => {
                if let Some(e) = external_id {
                    // A second rack with the same external id in one batch
                    // is the first one again.
                    known.insert(e.to_string(), entry.0.id);
                }
                outcome.push(RackImport::Created(entry.0.id));
                new.push(entry);
            }
        }
    }
    match insert_racks(&mut tx, &new).await {
        Ok(()) => {
            tx.commit().await?;
            refresh_statistics(backend, &["rack", "component", "bmc"]).await;
            Ok(outcome)
        }
        Err(batch_error) => {
            drop(tx);
            for (rack, components) in new {
                rack_create(backend, rack, components).await?;
            }
            // Every rack went in on its own: the batch's error was not one
            // a single rack reproduces (should not happen).
            Err(batch_error)
        }
    }
}

/// [`Backend::refresh_statistics`] after a bulk write that has committed:
/// a failure only costs plans, so it is logged, not returned.
pub(crate) async fn refresh_statistics<B: Backend>(backend: &B, tables: &[&'static str]) {
    if let Err(e) = backend.refresh_statistics(tables).await {
        tracing::warn!(?tables, error = %e, "could not refresh planner statistics after a bulk write");
    }
}

/// Binds one `rack` row (the columns of [`RACK_COLUMNS`]) into `sql` and
/// returns its `(…)` values group.
fn rack_row(sql: &mut Sql, rack: &Rack, now: DateTime<Utc>) -> StoreResult<String> {
    let location = to_json("rack.location", &rack.location)?;
    let values = [
        sql.bind(rack.id),
        sql.bind(rack.name.as_str()),
        sql.bind(rack.manufacturer.as_str()),
        sql.bind(rack.serial_number.as_str()),
        sql.bind(opt_non_empty(&rack.model)),
        sql.bind(opt_non_empty(&rack.description)),
        sql.bind(location),
        sql.bind(opt_non_empty(&rack.external_id)),
        sql.bind(rack.nvl_domain_id),
        sql.bind(now),
    ];
    // updated_at = created_at; deleted_at NULL.
    Ok(format!("({}, {}, NULL)", values.join(", "), values[9]))
}

/// Binds one `component` row (the columns of [`COMPONENT_INSERT_COLUMNS`]) into
/// `sql` and returns its `(…)` values group.
fn component_row(
    sql: &mut Sql,
    c: &Component,
    rack_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> String {
    let values = [
        sql.bind(c.id),
        sql.bind(rack_id),
        sql.bind(c.component_type.name()),
        sql.bind(c.name.as_str()),
        sql.bind(c.manufacturer.as_str()),
        sql.bind(opt_non_empty(&c.model)),
        sql.bind(c.serial_number.as_str()),
        sql.bind(opt_non_empty(&c.description)),
        sql.bind(c.firmware_version.as_str()),
        sql.bind(c.position.slot_id),
        sql.bind(c.position.tray_idx),
        sql.bind(c.position.host_id),
        sql.bind(opt_non_empty(&c.external_id)),
        sql.bind(opt_non_empty(&c.power_state)),
        sql.bind(c.operational.as_ref().map(|o| o.state.as_str().to_string())),
        sql.bind(c.operational.as_ref().and_then(|o| non_empty(&o.reason))),
        sql.bind(now),
    ];
    // updated_at = created_at; deleted_at NULL.
    format!("({}, {}, NULL)", values.join(", "), values[16])
}

/// The rows of `racks`, their components and BMCs, in multi-row inserts.
async fn insert_racks<T: Txn>(tx: &mut T, racks: &[&(Rack, Vec<Component>)]) -> StoreResult<()> {
    let now = now();
    for chunk in racks.chunks(RACK_INSERT_CHUNK) {
        let mut sql = Sql::new(format!("INSERT INTO rack ({RACK_INSERT_COLUMNS}) VALUES "));
        for (i, (rack, _)) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            let row = rack_row(&mut sql, rack, now)?;
            sql.push(&row);
        }
        tx.execute(sql).await?;
    }
    let components: Vec<(Uuid, &Component)> = racks
        .iter()
        .flat_map(|(rack, components)| components.iter().map(|c| (rack.id, c)))
        .collect();
    for chunk in components.chunks(COMPONENT_INSERT_CHUNK) {
        let mut sql = Sql::new(format!(
            "INSERT INTO component ({COMPONENT_INSERT_COLUMNS}) VALUES "
        ));
        for (i, (rack_id, c)) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            // The components of a rack belong to it, whatever their own
            // field says.
            let row = component_row(&mut sql, c, Some(*rack_id), now);
            sql.push(&row);
        }
        tx.execute(sql).await?;
    }
    let bmcs: Vec<(Uuid, &Bmc)> = components
        .iter()
        .flat_map(|(_, c)| c.bmcs.iter().map(|b| (c.id, b)))
        .collect();
    for chunk in bmcs.chunks(BMC_INSERT_CHUNK) {
        let mut sql =
            Sql::new("INSERT INTO bmc (mac_address, type, component_id, ip_address) VALUES ");
        for (i, (component_id, bmc)) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            let values = [
                sql.bind(mac_key(&bmc.mac_address)),
                sql.bind(bmc.bmc_type.name()),
                sql.bind(*component_id),
                sql.bind(opt_non_empty(&bmc.ip_address)),
            ];
            sql.push(&format!("({})", values.join(", ")));
        }
        tx.execute(sql).await?;
    }
    Ok(())
}

/// Inserts a component row and its BMCs inside `tx`.
async fn insert_component<T: Txn>(
    tx: &mut T,
    component: &Component,
    rack_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut insert = Sql::new(format!(
        "INSERT INTO component ({COMPONENT_INSERT_COLUMNS}) VALUES "
    ));
    let row = component_row(&mut insert, component, rack_id, now);
    insert.push(&row);
    tx.execute(insert).await.map_err(|e| {
        write_error(
            e,
            |key| match key {
                Some(UniqueKey::ComponentTypeExternalId) => format!(
                    "component type {:?} external_id {:?}",
                    component.component_type.name(),
                    component.external_id.as_deref().unwrap_or_default()
                ),
                _ => format!("component id \"{}\"", component.id),
            },
            || format!("rack \"{}\"", rack_id.unwrap_or_default()),
        )
    })?;
    for bmc in &component.bmcs {
        let mac = mac_key(&bmc.mac_address);
        let insert = Sql::new(
            "INSERT INTO bmc (mac_address, type, component_id, ip_address) \
             VALUES ($1, $2, $3, $4)",
        )
        .arg(mac.as_str())
        .arg(bmc.bmc_type.name())
        .arg(component.id)
        .arg(opt_non_empty(&bmc.ip_address));
        tx.execute(insert).await.map_err(|e| {
            write_error(
                e,
                |_| format!("bmc mac_address {mac:?}"),
                || format!("component \"{}\"", component.id),
            )
        })?;
    }
    Ok(())
}

pub(crate) async fn rack_get<B: Backend>(
    backend: &B,
    id: Uuid,
    include_deleted: bool,
) -> StoreResult<Option<Rack>> {
    let deleted = if include_deleted {
        ""
    } else {
        " AND deleted_at IS NULL"
    };
    let sql = Sql::new(format!(
        "SELECT {RACK_COLUMNS} FROM rack WHERE id = $1{deleted}"
    ))
    .arg(id);
    Ok(fetch_racks(backend, sql).await?.into_iter().next())
}

pub(crate) async fn rack_get_by_name<B: Backend>(
    backend: &B,
    name: &str,
) -> StoreResult<Vec<Rack>> {
    let sql = Sql::new(format!(
        "SELECT {RACK_COLUMNS} FROM rack WHERE name = $1 AND deleted_at IS NULL ORDER BY id"
    ))
    .arg(name);
    fetch_racks(backend, sql).await
}

pub(crate) async fn rack_get_by_external_id<B: Backend>(
    backend: &B,
    external_id: &str,
) -> StoreResult<Option<Rack>> {
    let sql = Sql::new(format!(
        "SELECT {RACK_COLUMNS} FROM rack WHERE external_id = $1 AND deleted_at IS NULL"
    ))
    .arg(external_id);
    Ok(fetch_racks(backend, sql).await?.into_iter().next())
}

/// The non-deleted rack with this (manufacturer, serial number).
pub(crate) async fn rack_get_by_serial<B: Backend>(
    backend: &B,
    manufacturer: &str,
    serial_number: &str,
) -> StoreResult<Option<Rack>> {
    let sql = Sql::new(format!(
        "SELECT {RACK_COLUMNS} FROM rack WHERE manufacturer = $1 AND serial_number = $2 \
         AND deleted_at IS NULL ORDER BY id"
    ))
    .arg(manufacturer)
    .arg(serial_number);
    Ok(fetch_racks(backend, sql).await?.into_iter().next())
}

/// The non-deleted component with this (manufacturer, serial number).
pub(crate) async fn component_get_by_serial<B: Backend>(
    backend: &B,
    manufacturer: &str,
    serial_number: &str,
) -> StoreResult<Option<Component>> {
    let sql = Sql::new(format!(
        "SELECT {COMPONENT_COLUMNS} FROM component WHERE manufacturer = $1 \
         AND serial_number = $2 AND deleted_at IS NULL ORDER BY id"
    ))
    .arg(manufacturer)
    .arg(serial_number);
    Ok(fetch_components(backend, sql).await?.into_iter().next())
}

/// Ordered by id.
pub(crate) async fn racks_get_many<B: Backend>(
    backend: &B,
    ids: &[Uuid],
) -> StoreResult<Vec<Rack>> {
    let mut racks = Vec::new();
    for chunk in sorted_ids(ids).chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT {RACK_COLUMNS} FROM rack WHERE id IN {list} ORDER BY id"
        ));
        racks.extend(fetch_racks(backend, sql).await?);
    }
    Ok(racks)
}

pub(crate) async fn rack_list<B: Backend>(
    backend: &B,
    filter: &RackFilter,
    page: Page,
) -> StoreResult<(Vec<Rack>, i64)> {
    let mut cond = Conditions::default();
    if !filter.include_deleted {
        cond.add("deleted_at IS NULL".to_string());
    }
    for (column, values) in [
        ("name", &filter.names),
        ("manufacturer", &filter.manufacturers),
        ("model", &filter.models),
    ] {
        if !values.is_empty() {
            let list = cond.sql.bind_list(values.iter().map(String::as_str));
            cond.add(format!("{column} IN {list}"));
        }
    }
    add_text_filters::<B>(&mut cond, &filter.text);
    if filter.with_external_id_only {
        cond.add("external_id IS NOT NULL".to_string());
    }
    if let Some(domain) = filter.nvl_domain_id {
        let domain = cond.sql.bind(domain);
        cond.add(format!("nvldomain_id = {domain}"));
    }
    if !filter.lifecycle.is_empty() {
        let list = cond
            .sql
            .bind_list(filter.lifecycle.iter().map(|s| s.as_str()));
        cond.add(format!("status IN {list}"));
    }
    let total = fetch_count(backend, cond.count("rack")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let order = filter
        .order
        .map(order_clause)
        .unwrap_or_else(|| "name ASC, id ASC".to_string());
    let racks = fetch_racks(backend, cond.page(RACK_COLUMNS, "rack", &order, page)).await?;
    Ok((racks, total))
}

pub(crate) async fn rack_soft_delete<B: Backend>(backend: &B, id: Uuid) -> StoreResult<bool> {
    let now = now();
    let mut tx = backend.begin().await?;
    let deleted = tx
        .execute(
            Sql::new(
                "UPDATE rack SET deleted_at = $2, updated_at = $2 \
                 WHERE id = $1 AND deleted_at IS NULL",
            )
            .arg(id)
            .arg(now),
        )
        .await?;
    if deleted == 0 {
        return Ok(false);
    }
    tx.execute(
        Sql::new(
            "UPDATE component SET deleted_at = $2, updated_at = $2 \
             WHERE rack_id = $1 AND deleted_at IS NULL",
        )
        .arg(id)
        .arg(now),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// [`crate::Store::rack_patch`]: the rack is read and updated under its
/// row lock, so the before / after pair is exactly this patch's change.
pub(crate) async fn rack_patch<B: Backend>(
    backend: &B,
    id: Uuid,
    patch: &RackPatch,
) -> StoreResult<Option<(Rack, Rack)>> {
    let lock = B::for_update(false);
    let select = || {
        Sql::new(format!(
            "SELECT {RACK_COLUMNS} FROM rack WHERE id = $1 AND deleted_at IS NULL{lock}"
        ))
        .arg(id)
    };
    let mut tx = backend.begin().await?;
    let Some(before) = tx
        .fetch_all(select())
        .await?
        .first()
        .map(rack_from_row)
        .transpose()?
    else {
        return Ok(None);
    };
    let mut update = Sql::default();
    let mut sets = vec![format!("updated_at = {}", update.bind(now()))];
    if let Some(name) = &patch.name {
        sets.push(format!("name = {}", update.bind(name.as_str())));
    }
    if let Some(description) = &patch.description {
        sets.push(format!(
            "description = {}",
            update.bind(non_empty(description))
        ));
    }
    if let Some(location) = &patch.location {
        let location = to_json("rack.location", location)?;
        sets.push(format!("location = {}", update.bind(location)));
    }
    let id_param = update.bind(id);
    update.push(&format!(
        "UPDATE rack SET {} WHERE id = {id_param}",
        sets.join(", ")
    ));
    tx.execute(update).await?;
    let after = tx
        .fetch_all(select())
        .await?
        .first()
        .map(rack_from_row)
        .transpose()?
        .ok_or_else(|| StoreError::NotFound(format!("rack \"{id}\"")))?;
    tx.commit().await?;
    Ok(Some((before, after)))
}

/// [`crate::Store::rack_purge`]. The rack's tasks, rule associations and
/// schedule scopes go by their foreign keys' cascade; its components (and
/// through them their BMCs) are deleted first, as `component.rack_id`
/// does not cascade.
pub(crate) async fn rack_purge<B: Backend>(backend: &B, id: Uuid) -> StoreResult<PurgeOutcome> {
    let lock = B::for_update(false);
    let mut tx = backend.begin().await?;
    let rows = tx
        .fetch_all(
            Sql::new(format!(
                "SELECT {RACK_COLUMNS} FROM rack WHERE id = $1{lock}"
            ))
            .arg(id),
        )
        .await?;
    let Some(rack) = rows.first().map(rack_from_row).transpose()? else {
        return Ok(PurgeOutcome::NotFound);
    };
    if rack.deleted_at.is_none() {
        return Ok(PurgeOutcome::NotDeleted);
    }
    let unfinished = tx
        .fetch_all(
            Sql::new(format!(
                "SELECT COUNT(*) AS n FROM task WHERE rack_id = $1 AND status IN {UNFINISHED}"
            ))
            .arg(id),
        )
        .await?;
    let busy = match unfinished.first() {
        Some(row) => row.i64("n")?,
        None => 0,
    };
    if busy > 0 {
        return Ok(PurgeOutcome::Busy(
            usize::try_from(busy).unwrap_or(usize::MAX),
        ));
    }
    tx.execute(Sql::new("DELETE FROM component WHERE rack_id = $1").arg(id))
        .await?;
    tx.execute(Sql::new("DELETE FROM rack WHERE id = $1").arg(id))
        .await?;
    tx.commit().await?;
    Ok(PurgeOutcome::Purged)
}

/// [`crate::Store::racks_of_nvl_domains`].
pub(crate) async fn racks_of_nvl_domains<B: Backend>(
    backend: &B,
    domain_ids: &[Uuid],
) -> StoreResult<Vec<Rack>> {
    let mut racks = Vec::new();
    for chunk in sorted_ids(domain_ids).chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT {RACK_COLUMNS} FROM rack WHERE nvldomain_id IN {list} \
             AND deleted_at IS NULL"
        ));
        racks.extend(fetch_racks(backend, sql).await?);
    }
    racks.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
    Ok(racks)
}

/// [`crate::Store::racks_set_nvl_domain`].
pub(crate) async fn racks_set_nvl_domain<B: Backend>(
    backend: &B,
    rack_ids: &[Uuid],
    domain_id: Option<Uuid>,
) -> StoreResult<u64> {
    let now = now();
    let mut changed = 0;
    let mut tx = backend.begin().await?;
    for chunk in sorted_ids(rack_ids).chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let domain = sql.bind(domain_id);
        let at = sql.bind(now);
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "UPDATE rack SET nvldomain_id = {domain}, updated_at = {at} \
             WHERE id IN {list} AND deleted_at IS NULL"
        ));
        changed += tx.execute(sql).await.map_err(|e| {
            write_error(
                e,
                |_| "rack".to_string(),
                || format!("NVL domain \"{}\"", domain_id.unwrap_or_default()),
            )
        })?;
    }
    tx.commit().await?;
    Ok(changed)
}

/// [`crate::Store::nvl_domain_create`].
pub(crate) async fn nvl_domain_create<B: Backend>(
    backend: &B,
    domain: &NvlDomain,
) -> StoreResult<()> {
    let now = now();
    let mut insert = Sql::new(format!(
        "INSERT INTO nvldomain ({NVL_DOMAIN_COLUMNS}) VALUES "
    ));
    let values = [
        insert.bind(domain.id),
        insert.bind(opt_non_empty(&domain.name)),
        insert.bind(opt_non_empty(&domain.external_id)),
        insert.bind(opt_non_empty(&domain.nmxc_cluster_id)),
        insert.bind(now),
    ];
    insert.push(&format!("({}, {}, NULL)", values.join(", "), values[4]));
    let mut tx = backend.begin().await?;
    tx.execute(insert).await.map_err(|e| {
        write_error(
            e,
            |key| match key {
                Some(UniqueKey::NvlDomainName) => format!(
                    "NVL domain name {:?}",
                    domain.name.as_deref().unwrap_or_default()
                ),
                Some(UniqueKey::NvlDomainExternalId) => format!(
                    "NVL domain external_id {:?}",
                    domain.external_id.as_deref().unwrap_or_default()
                ),
                _ => format!("NVL domain id \"{}\"", domain.id),
            },
            || "referenced row".to_string(),
        )
    })?;
    tx.commit().await?;
    Ok(())
}

/// A non-deleted domain by one of its unique columns; `column` is a
/// constant of the caller.
pub(crate) async fn nvl_domain_get<B: Backend, V>(
    backend: &B,
    column: &'static str,
    value: V,
) -> StoreResult<Option<NvlDomain>>
where
    V: Into<crate::sql::Arg>,
{
    let sql = Sql::new(format!(
        "SELECT {NVL_DOMAIN_COLUMNS} FROM nvldomain WHERE {column} = $1 AND deleted_at IS NULL"
    ))
    .arg(value);
    let rows = backend.fetch_all(sql).await?;
    rows.first().map(nvl_domain_from_row).transpose()
}

/// [`crate::Store::nvl_domains_get_many`].
pub(crate) async fn nvl_domains_get_many<B: Backend>(
    backend: &B,
    ids: &[Uuid],
) -> StoreResult<Vec<NvlDomain>> {
    let mut domains = Vec::new();
    for chunk in sorted_ids(ids).chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT {NVL_DOMAIN_COLUMNS} FROM nvldomain WHERE id IN {list} \
             AND deleted_at IS NULL ORDER BY id"
        ));
        for row in backend.fetch_all(sql).await? {
            domains.push(nvl_domain_from_row(&row)?);
        }
    }
    Ok(domains)
}

/// [`crate::Store::nvl_domain_list`]: unnamed domains sort first (last
/// descending), in both dialects.
pub(crate) async fn nvl_domain_list<B: Backend>(
    backend: &B,
    query: &crate::NvlDomainQuery,
    page: Page,
) -> StoreResult<(Vec<NvlDomain>, i64)> {
    let mut cond = Conditions::default();
    cond.add("deleted_at IS NULL".to_string());
    if query.external_only {
        cond.add("external_id IS NOT NULL".to_string());
        let by_name = text_condition::<B>(&mut cond.sql, "name", &query.name);
        let by_external_id = text_condition::<B>(&mut cond.sql, "external_id", &query.name);
        if let (Some(name), Some(external_id)) = (by_name, by_external_id) {
            cond.add(format!("(({name}) OR ({external_id}))"));
        }
    } else if let Some(c) = text_condition::<B>(&mut cond.sql, "name", &query.name) {
        cond.add(c);
    }
    let descending = query.descending;
    let total = fetch_count(backend, cond.count("nvldomain")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let order = order_clause(ListOrder {
        column: crate::InventoryColumn::Name,
        descending,
    });
    let rows = backend
        .fetch_all(cond.page(NVL_DOMAIN_COLUMNS, "nvldomain", &order, page))
        .await?;
    let domains = rows
        .iter()
        .map(nvl_domain_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((domains, total))
}

/// [`crate::Store::component_soft_delete`].
pub(crate) async fn component_soft_delete<B: Backend>(backend: &B, id: Uuid) -> StoreResult<bool> {
    let now = now();
    let mut tx = backend.begin().await?;
    let deleted = tx
        .execute(
            Sql::new(
                "UPDATE component SET deleted_at = $2, updated_at = $2 \
                 WHERE id = $1 AND deleted_at IS NULL",
            )
            .arg(id)
            .arg(now),
        )
        .await?;
    tx.commit().await?;
    Ok(deleted > 0)
}

/// [`crate::Store::component_purge`]: its BMCs go by their cascade.
pub(crate) async fn component_purge<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<PurgeOutcome> {
    let lock = B::for_update(false);
    let mut tx = backend.begin().await?;
    let rows = tx
        .fetch_all(
            Sql::new(format!(
                "SELECT deleted_at FROM component WHERE id = $1{lock}"
            ))
            .arg(id),
        )
        .await?;
    let Some(row) = rows.first() else {
        return Ok(PurgeOutcome::NotFound);
    };
    if row.opt_ts("deleted_at")?.is_none() {
        return Ok(PurgeOutcome::NotDeleted);
    }
    tx.execute(Sql::new("DELETE FROM component WHERE id = $1").arg(id))
        .await?;
    tx.commit().await?;
    Ok(PurgeOutcome::Purged)
}

pub(crate) async fn component_create<B: Backend>(
    backend: &B,
    component: &Component,
) -> StoreResult<()> {
    let mut tx = backend.begin().await?;
    insert_component(&mut tx, component, component.rack_id, now()).await?;
    tx.commit().await?;
    Ok(())
}

/// Soft-deleted components included: the caller sees `deleted_at` (purge
/// needs the deleted ones).
pub(crate) async fn component_get<B: Backend>(
    backend: &B,
    id: Uuid,
) -> StoreResult<Option<Component>> {
    let sql = Sql::new(format!(
        "SELECT {COMPONENT_COLUMNS} FROM component WHERE id = $1"
    ))
    .arg(id);
    Ok(fetch_components(backend, sql).await?.into_iter().next())
}

pub(crate) async fn component_list<B: Backend>(
    backend: &B,
    filter: &ComponentFilterQuery,
    page: Page,
) -> StoreResult<(Vec<Component>, i64)> {
    let mut cond = Conditions::default();
    if !filter.include_deleted {
        cond.add("deleted_at IS NULL".to_string());
    }
    if !filter.rack_ids.is_empty() {
        let list = cond.sql.bind_list(filter.rack_ids.iter().copied());
        cond.add(format!("rack_id IN {list}"));
    }
    if !filter.ids.is_empty() {
        let list = cond.sql.bind_list(filter.ids.iter().copied());
        cond.add(format!("id IN {list}"));
    }
    if !filter.types.is_empty() {
        let list = cond.sql.bind_list(filter.types.iter().map(|t| t.name()));
        cond.add(format!("type IN {list}"));
    }
    if !filter.external_ids.is_empty() {
        let list = cond
            .sql
            .bind_list(filter.external_ids.iter().map(String::as_str));
        cond.add(format!("external_id IN {list}"));
    }
    if !filter.names.is_empty() {
        let list = cond.sql.bind_list(filter.names.iter().map(String::as_str));
        cond.add(format!("name IN {list}"));
    }
    if !filter.leak_statuses.is_empty() {
        let list = cond.sql.bind_list(
            filter
                .leak_statuses
                .iter()
                .map(|s| s.map_or(UNKNOWN_LEAK_STATUS, LeakStatus::as_str)),
        );
        cond.add(format!("leak_status IN {list}"));
    }
    add_text_filters::<B>(&mut cond, &filter.text);
    let total = fetch_count(backend, cond.count("component")).await?;
    if total == 0 {
        return Ok((Vec::new(), 0));
    }
    let order = filter
        .order
        .map(order_clause)
        .unwrap_or_else(|| COMPONENT_ORDER.to_string());
    let components = fetch_components(
        backend,
        cond.page(COMPONENT_COLUMNS, "component", &order, page),
    )
    .await?;
    Ok((components, total))
}

pub(crate) async fn components_of_racks<B: Backend>(
    backend: &B,
    rack_ids: &[Uuid],
    bmcs: bool,
) -> StoreResult<Vec<Component>> {
    let mut components = Vec::new();
    // Sorted chunks keep the overall rack-id-first order across queries.
    for chunk in sorted_ids(rack_ids).chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT {COMPONENT_COLUMNS} FROM component \
             WHERE rack_id IN {list} AND deleted_at IS NULL ORDER BY {COMPONENT_ORDER}"
        ));
        for row in backend.fetch_all(sql).await? {
            components.push(component_from_row(&row)?);
        }
    }
    if bmcs {
        with_bmcs(backend, components).await
    } else {
        Ok(components)
    }
}

/// The planner's view of many racks: (rack, type, component id) of every
/// non-deleted component, without the rest of the row or the BMCs, which
/// planning never needs (reading them dominated CreateOperationRun).
pub(crate) async fn component_keys_of_racks<B: Backend>(
    backend: &B,
    rack_ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, ComponentType, Uuid)>> {
    // One row per rack, its keys joined into one text: a row per component
    // (350,000 for 10,000 racks) cost more to hand over and decode than to
    // read, and this read is most of CreateOperationRun at that size.
    let keys_of_rack = B::ordered_text_agg(
        "type || ' ' || CAST(id AS TEXT)",
        "type, slot_id, tray_index, name, id",
    );
    let mut keys = Vec::new();
    for chunk in sorted_ids(rack_ids).chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let list = sql.bind_list(chunk.iter().copied());
        sql.push(&format!(
            "SELECT rack_id, {keys_of_rack} AS component_keys FROM component \
             WHERE rack_id IN {list} AND deleted_at IS NULL GROUP BY rack_id ORDER BY rack_id"
        ));
        for row in backend.fetch_all(sql).await? {
            let rack_id = row.uuid("rack_id")?;
            let joined = row.text("component_keys")?;
            for key in joined.split(',') {
                let decode = |detail: String| StoreError::Decode {
                    what: "component keys",
                    detail,
                };
                let (type_name, id) = key
                    .split_once(' ')
                    .ok_or_else(|| decode(format!("no type and id in {key:?}")))?;
                let id = Uuid::parse_str(id).map_err(|e| decode(format!("{key:?}: {e}")))?;
                keys.push((rack_id, component_type_from_db(type_name)?, id));
            }
        }
    }
    Ok(keys)
}

/// Non-deleted components only: this resolves identifiers of live inventory.
pub(crate) async fn components_by_bmc_mac<B: Backend>(
    backend: &B,
    mac: &str,
) -> StoreResult<Vec<Component>> {
    let sql = Sql::new(format!(
        "SELECT {COMPONENT_COLUMNS} FROM component \
         WHERE id IN (SELECT component_id FROM bmc WHERE mac_address = $1) \
         AND deleted_at IS NULL ORDER BY {COMPONENT_ORDER}"
    ))
    .arg(mac_key(mac));
    fetch_components(backend, sql).await
}

/// Patches a non-deleted component. A BMC whose MAC belongs to another
/// component is refused with `AlreadyExists` (it is not moved).
pub(crate) async fn component_patch<B: Backend>(
    backend: &B,
    id: Uuid,
    patch: &ComponentPatch,
) -> StoreResult<Option<Component>> {
    let now = now();
    let mut update = Sql::default();
    let mut sets = vec![format!("updated_at = {}", update.bind(now))];
    if let Some(v) = &patch.firmware_version {
        // A version set by hand is a claim, not an observation.
        sets.push(format!("firmware_version = {}", update.bind(v.as_str())));
        sets.push("firmware_observed_at = NULL".to_string());
    }
    if let Some(v) = patch.slot_id {
        sets.push(format!("slot_id = {}", update.bind(v)));
    }
    if let Some(v) = patch.tray_idx {
        sets.push(format!("tray_index = {}", update.bind(v)));
    }
    if let Some(v) = patch.host_id {
        sets.push(format!("host_id = {}", update.bind(v)));
    }
    if let Some(v) = &patch.description {
        sets.push(format!("description = {}", update.bind(non_empty(v))));
    }
    if let Some(v) = patch.rack_id {
        sets.push(format!("rack_id = {}", update.bind(v)));
    }
    if let Some(v) = &patch.operational {
        let (state, reason) = match v {
            Some(status) => (
                Some(status.state.as_str().to_string()),
                non_empty(&status.reason),
            ),
            None => (None, None),
        };
        sets.push(format!("operational_state = {}", update.bind(state)));
        sets.push(format!("operational_reason = {}", update.bind(reason)));
    }
    let id_param = update.bind(id);
    update.push(&format!(
        "UPDATE component SET {} WHERE id = {id_param} AND deleted_at IS NULL",
        sets.join(", ")
    ));

    let mut tx = backend.begin().await?;
    let updated = tx.execute(update).await.map_err(|e| {
        write_error(
            e,
            |_| format!("component id \"{id}\""),
            || format!("rack \"{}\"", patch.rack_id.flatten().unwrap_or_default()),
        )
    })?;
    if updated == 0 {
        return Ok(None);
    }
    for bmc in &patch.bmcs {
        let mac = mac_key(&bmc.mac_address);
        // Upsert restricted to this component's own rows: a MAC owned by
        // another component leaves the row alone and affects nothing.
        let upsert = Sql::new(
            "INSERT INTO bmc (mac_address, type, component_id, ip_address) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (mac_address) DO UPDATE \
             SET type = excluded.type, ip_address = excluded.ip_address \
             WHERE bmc.component_id = excluded.component_id",
        )
        .arg(mac.as_str())
        .arg(bmc.bmc_type.name())
        .arg(id)
        .arg(opt_non_empty(&bmc.ip_address));
        let affected = tx.execute(upsert).await?;
        if affected == 0 {
            return Err(StoreError::AlreadyExists(format!(
                "bmc mac_address {mac:?}"
            )));
        }
    }
    tx.commit().await?;
    component_get(backend, id).await
}

/// Of `ids`, the non-deleted components whose operational state is one of
/// `states` (the readiness gate's question), in id order.
pub(crate) async fn components_in_states<B: Backend>(
    backend: &B,
    ids: &[Uuid],
    states: &[OperationalState],
) -> StoreResult<Vec<Uuid>> {
    if ids.is_empty() || states.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for chunk in ids.chunks(ID_CHUNK) {
        let mut sql = Sql::default();
        let id_list = sql.bind_list(chunk.iter().copied());
        let state_list = sql.bind_list(states.iter().map(|s| s.as_str()));
        sql.push(&format!(
            "SELECT id FROM component WHERE id IN {id_list} AND deleted_at IS NULL \
             AND operational_state IN {state_list}"
        ));
        for row in backend.fetch_all(sql).await? {
            found.push(row.uuid("id")?);
        }
    }
    found.sort();
    Ok(found)
}

/// Records what component managers read back. Each observation sets the
/// fields it carries and their observation time, unless a newer
/// observation of that field is already stored (two steps can finish out
/// of order); deleted components are left alone. One transaction.
pub(crate) async fn components_observe<B: Backend>(
    backend: &B,
    observations: &[Observation],
) -> StoreResult<()> {
    if observations.is_empty() {
        return Ok(());
    }
    let mut tx = backend.begin().await?;
    for o in observations {
        for (value, column, at_column) in [
            (
                &o.firmware_version,
                "firmware_version",
                "firmware_observed_at",
            ),
            (&o.power_state, "power_state", "power_observed_at"),
        ] {
            let Some(value) = value else {
                continue;
            };
            let mut sql = Sql::default();
            let value = sql.bind(value.as_str());
            let at = sql.bind(o.observed_at);
            let id = sql.bind(o.component_id);
            sql.push(&format!(
                "UPDATE component SET {column} = {value}, {at_column} = {at} \
                 WHERE id = {id} AND deleted_at IS NULL \
                 AND ({at_column} IS NULL OR {at_column} <= {at})"
            ));
            tx.execute(sql).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
