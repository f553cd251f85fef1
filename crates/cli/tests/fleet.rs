//! Fleet generation: deterministic by seed, realistic shape, unique ids and
//! MACs; the file format round-trips through JSON and YAML.

use std::collections::HashSet;
use std::path::Path;

use rackflow_cli::fleet::{
    COMPONENTS_PER_RACK, FleetFile, add_facility_components, generate, group_into_domains,
    parse_by_format,
};
use rackflow_domain::ComponentType;

#[test]
fn same_seed_same_fleet_other_seed_other_fleet() {
    let a = generate(12, 7).unwrap();
    let b = generate(12, 7).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let c = generate(12, 8).unwrap();
    assert_ne!(a, c);
    // A larger fleet with the same seed starts with different racks only
    // because the generator is sequential; its shape stays the same.
    assert_eq!(generate(13, 7).unwrap().racks.len(), 13);
}

#[test]
fn every_rack_is_an_nvl72_with_35_components() {
    let fleet = generate(20, 3).unwrap();
    assert_eq!(fleet.racks.len(), 20);
    for rack in &fleet.racks {
        assert_eq!(rack.components.len(), COMPONENTS_PER_RACK);
        assert_eq!(rack.components.len(), 35);
        let count = |t: ComponentType| {
            rack.components
                .iter()
                .filter(|c| c.component_type == t)
                .count()
        };
        assert_eq!(count(ComponentType::Compute), 18);
        assert_eq!(count(ComponentType::NvSwitch), 9);
        assert_eq!(count(ComponentType::PowerShelf), 8);
        assert!(rack.model.as_deref().unwrap().ends_with("NVL72"));
        assert!(!rack.serial_number.is_empty());
        assert!(rack.location.position.starts_with("row-"));
        assert!(rack.location.position.contains("/pos-"));
        // Slots 1..=35, each used once.
        let slots: HashSet<i32> = rack.components.iter().map(|c| c.position.slot_id).collect();
        assert_eq!(slots, (1..=35).collect());
        for c in &rack.components {
            assert!(!c.firmware_version.is_empty());
            assert!(c.external_id.starts_with(&rack.external_id));
            assert_eq!(c.bmcs.len(), 1);
        }
    }
    assert_eq!(fleet.racks[0].name, "rack-a01");
    assert_eq!(fleet.racks[0].external_id, "r-0001");
    assert_eq!(fleet.racks[8].name, "rack-b01");
    assert_eq!(fleet.racks[19].external_id, "r-0020");
    assert_eq!(
        fleet.racks[0].components[4].external_id,
        "r-0001-compute-01"
    );
}

#[test]
fn external_ids_serials_and_macs_are_unique() {
    let fleet = generate(300, 11).unwrap();
    let mut racks = HashSet::new();
    let mut rack_serials = HashSet::new();
    let mut components = HashSet::new();
    let mut serials = HashSet::new();
    let mut macs = HashSet::new();
    let mut ips = HashSet::new();
    for rack in &fleet.racks {
        assert!(racks.insert(rack.external_id.clone()));
        assert!(rack_serials.insert((rack.manufacturer.clone(), rack.serial_number.clone())));
        for c in &rack.components {
            assert!(components.insert((c.component_type, c.external_id.clone())));
            assert!(serials.insert((c.manufacturer.clone(), c.serial_number.clone())));
            for bmc in &c.bmcs {
                assert!(macs.insert(bmc.mac_address.clone()), "{}", bmc.mac_address);
                assert!(ips.insert(bmc.ip_address.clone().unwrap()));
                // Locally administered, unicast.
                let first = u8::from_str_radix(&bmc.mac_address[..2], 16).unwrap();
                assert_eq!(first & 0b11, 0b10, "{}", bmc.mac_address);
                assert_eq!(bmc.mac_address.split(':').count(), 6);
            }
        }
    }
    assert_eq!(macs.len(), 300 * 35);
    fleet.check().unwrap();
}

#[test]
fn rack_count_is_bounded() {
    assert!(generate(0, 1).is_err());
    assert!(generate(65_536, 1).is_err());
}

#[test]
fn fleet_file_round_trips_through_json_and_yaml() {
    let fleet = generate(2, 5).unwrap();
    let json = serde_json::to_string_pretty(&fleet).unwrap();
    let yaml = serde_yaml::to_string(&fleet).unwrap();
    // By extension, and by content when the extension says nothing.
    let from_json: FleetFile = parse_by_format(Path::new("f.json"), &json).unwrap();
    let from_yaml: FleetFile = parse_by_format(Path::new("f.yaml"), &yaml).unwrap();
    let sniffed_json: FleetFile = parse_by_format(Path::new("fleet"), &json).unwrap();
    let sniffed_yaml: FleetFile = parse_by_format(Path::new("fleet"), &yaml).unwrap();
    for parsed in [from_json, from_yaml, sniffed_json, sniffed_yaml] {
        assert_eq!(parsed, fleet);
    }
    // No UUIDs in the file: the server assigns them.
    assert!(!json.contains("\"id\""));
    assert!(json.contains("\"type\": \"NVSwitch\""));
}

#[test]
fn hand_written_yaml_uses_defaults_and_aliases() {
    let yaml = r#"
racks:
  - name: lab-1
    external_id: lab-0001
    manufacturer: Foxconn
    serial_number: SN1
    components:
      - type: compute
        name: lab-1-c1
        manufacturer: Foxconn
        serial_number: C1
        external_id: lab-0001-c1
        bmcs:
          - mac_address: "02:00:00:00:00:01"
"#;
    let fleet: FleetFile = parse_by_format(Path::new("lab.yml"), yaml).unwrap();
    fleet.check().unwrap();
    let c = &fleet.racks[0].components[0];
    assert_eq!(c.component_type, ComponentType::Compute);
    assert_eq!(c.position.slot_id, 0);
    assert!(fleet.racks[0].model.is_none());

    let mut twice = fleet.clone();
    twice.racks.push(fleet.racks[0].clone());
    let err = twice.check().unwrap_err().to_string();
    assert!(err.contains("duplicate external_id"), "{err}");

    let unknown = yaml.replace("serial_number: SN1", "serial_number: SN1\n    colour: red");
    assert!(parse_by_format::<FleetFile>(Path::new("lab.yml"), &unknown).is_err());
}

#[test]
fn racks_group_into_domains_in_file_order() {
    let mut fleet = generate(5, 3).unwrap();
    let plain = serde_json::to_value(&fleet).unwrap();
    assert!(plain.get("nvl_domains").is_none(), "absent unless asked");
    assert!(plain["racks"][0].get("nvl_domain").is_none());
    group_into_domains(&mut fleet, 2).unwrap();
    let dc = fleet.racks[0].location.datacenter.clone();
    let names: Vec<&str> = fleet.nvl_domains.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            format!("{dc}-nvl-001"),
            format!("{dc}-nvl-002"),
            format!("{dc}-nvl-003")
        ]
    );
    assert_eq!(
        fleet.nvl_domains[0].external_id.as_deref(),
        Some(format!("grp-{dc}-001").as_str())
    );
    let of: Vec<&str> = fleet
        .racks
        .iter()
        .map(|r| r.nvl_domain.as_deref().unwrap())
        .collect();
    assert_eq!(of, [names[0], names[0], names[1], names[1], names[2]]);
    fleet.check().unwrap();
    assert!(group_into_domains(&mut fleet, 0).is_err());

    // A rack naming an undeclared domain, and a duplicate domain, are refused.
    let mut bad = fleet.clone();
    bad.racks[1].nvl_domain = Some("nope".into());
    let err = bad.check().unwrap_err().to_string();
    assert!(err.contains("\"nope\" is not one of nvl_domains"), "{err}");
    let mut twice = fleet.clone();
    twice.nvl_domains.push(twice.nvl_domains[0].clone());
    assert!(
        twice
            .check()
            .unwrap_err()
            .to_string()
            .contains("duplicate name")
    );
}

#[test]
fn racks_can_carry_a_tor_switch_a_ums_and_a_cdu() {
    let mut fleet = generate(4, 11).unwrap();
    let before = fleet.clone();
    add_facility_components(&mut fleet);
    let mut again = before.clone();
    add_facility_components(&mut again);
    assert_eq!(fleet, again, "deterministic");
    fleet.check().unwrap();
    for (rack, plain) in fleet.racks.iter().zip(&before.racks) {
        assert_eq!(rack.components.len(), COMPONENTS_PER_RACK + 3);
        assert_eq!(rack.components[..COMPONENTS_PER_RACK], plain.components[..]);
        let added: Vec<(ComponentType, i32)> = rack.components[COMPONENTS_PER_RACK..]
            .iter()
            .map(|c| (c.component_type, c.position.slot_id))
            .collect();
        assert_eq!(
            added,
            [
                (ComponentType::TorSwitch, 36),
                (ComponentType::Ums, 37),
                (ComponentType::Cdu, 38)
            ]
        );
        for c in &rack.components[COMPONENTS_PER_RACK..] {
            assert!(c.external_id.starts_with(&rack.external_id), "{c:?}");
            assert!(!c.firmware_version.is_empty());
            let ip = c.bmcs[0].ip_address.as_deref().unwrap();
            assert!(
                ip.ends_with(&format!(".{}", 10 + c.position.slot_id)),
                "{ip}"
            );
        }
    }
}
