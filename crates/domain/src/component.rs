//! Component types and frozen per-type component sets (`components_by_type`).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Kind of device inside a rack. Numeric values are the wire enum values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ComponentType {
    Unknown = 0,
    Compute = 1,
    NvSwitch = 2,
    PowerShelf = 3,
    TorSwitch = 4,
    Ums = 5,
    Cdu = 6,
}

impl ComponentType {
    /// Every known type (without `Unknown`), in wire order.
    pub const KNOWN: [ComponentType; 6] = [
        ComponentType::Compute,
        ComponentType::NvSwitch,
        ComponentType::PowerShelf,
        ComponentType::TorSwitch,
        ComponentType::Ums,
        ComponentType::Cdu,
    ];

    /// The storage / message name (`Compute`, `NVSwitch`, …; `Unknown` for 0).
    pub fn name(self) -> &'static str {
        match self {
            ComponentType::Unknown => "Unknown",
            ComponentType::Compute => "Compute",
            ComponentType::NvSwitch => "NVSwitch",
            ComponentType::PowerShelf => "PowerShelf",
            ComponentType::TorSwitch => "ToRSwitch",
            ComponentType::Ums => "UMS",
            ComponentType::Cdu => "CDU",
        }
    }

    /// Case-insensitive parse of a type name; also accepts the CLI aliases
    /// (`nvl-switch`, `power-shelf`, `tor-switch`). Unknown names give `None`.
    pub fn parse(name: &str) -> Option<ComponentType> {
        let lowered = name.trim().to_ascii_lowercase();
        Some(match lowered.as_str() {
            "compute" => ComponentType::Compute,
            "nvswitch" | "nvl-switch" => ComponentType::NvSwitch,
            "powershelf" | "power-shelf" => ComponentType::PowerShelf,
            "torswitch" | "tor-switch" => ComponentType::TorSwitch,
            "ums" => ComponentType::Ums,
            "cdu" => ComponentType::Cdu,
            _ => return None,
        })
    }

    /// From the wire enum number; unrecognised numbers give `None`.
    pub fn from_i32(value: i32) -> Option<ComponentType> {
        Some(match value {
            0 => ComponentType::Unknown,
            1 => ComponentType::Compute,
            2 => ComponentType::NvSwitch,
            3 => ComponentType::PowerShelf,
            4 => ComponentType::TorSwitch,
            5 => ComponentType::Ums,
            6 => ComponentType::Cdu,
            _ => return None,
        })
    }
}

impl fmt::Display for ComponentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for ComponentType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ComponentType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == "Unknown" {
            return Ok(ComponentType::Unknown);
        }
        ComponentType::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown component type {name:?}")))
    }
}

/// A violation of the component-set rules (spec operation-runs §5.5). The
/// `Display` text is the reference message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComponentSetError {
    #[error("Non-empty ComponentsByType is required")]
    Empty,
    #[error("ComponentsByType contains unknown component type")]
    UnknownType,
    #[error("{0} must include at least one component")]
    EmptyType(ComponentType),
    #[error("{0} contains empty component UUID")]
    NilId(ComponentType),
    #[error("{0} duplicates component {1}")]
    Duplicate(ComponentType, Uuid),
    #[error("component {id} appears under both {first} and {second}")]
    TwoTypes {
        id: Uuid,
        first: ComponentType,
        second: ComponentType,
    },
    #[error("components_by_type component {id} appears under both {first} and {second}")]
    MergeTwoTypes {
        id: Uuid,
        first: ComponentType,
        second: ComponentType,
    },
}

/// Component ids of one rack grouped by type. Iteration and serialisation go
/// by type name (`CDU`, `Compute`, `NVSwitch`, …), matching the reference's
/// "groups sorted by type name"; the ids of a type keep their stored order
/// (sorted once frozen, see [`ComponentsByType::sorted`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentsByType {
    groups: BTreeMap<TypeByName, Vec<Uuid>>,
}

/// Whether a short id list repeats an id (sort a scratch copy: O(k log k)).
fn has_duplicates(ids: &[Uuid]) -> bool {
    let mut scratch = ids.to_vec();
    scratch.sort_unstable();
    scratch.windows(2).any(|w| w[0] == w[1])
}

/// Orders component types by their name, as the reference sorts groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TypeByName(ComponentType);

impl Ord for TypeByName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.name().cmp(other.0.name())
    }
}

impl PartialOrd for TypeByName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl ComponentsByType {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `id` under `ty` (no de-duplication; see [`Self::normalized`]).
    pub fn push(&mut self, ty: ComponentType, id: Uuid) {
        self.groups.entry(TypeByName(ty)).or_default().push(id);
    }

    /// Replaces the ids of one type.
    pub fn insert(&mut self, ty: ComponentType, ids: Vec<Uuid>) {
        self.groups.insert(TypeByName(ty), ids);
    }

    pub fn get(&self, ty: ComponentType) -> Option<&[Uuid]> {
        self.groups.get(&TypeByName(ty)).map(Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Number of component ids over all types.
    pub fn component_count(&self) -> usize {
        self.groups.values().map(Vec::len).sum()
    }

    /// Groups in type-name order.
    pub fn iter(&self) -> impl Iterator<Item = (ComponentType, &[Uuid])> {
        self.groups.iter().map(|(t, ids)| (t.0, ids.as_slice()))
    }

    /// Drops empty groups.
    pub fn remove_empty(&mut self) {
        self.groups.retain(|_, ids| !ids.is_empty());
    }

    /// Per-type de-duplication keeping first-seen order, then [`Self::validate`].
    pub fn normalized(&self) -> Result<ComponentsByType, ComponentSetError> {
        self.clone().into_normalized()
    }

    /// [`Self::normalized`] without the copy. Planning normalises hundreds of
    /// thousands of ids, so the common case (no duplicates) does no extra
    /// allocation per type beyond one sorted scratch copy.
    pub fn into_normalized(mut self) -> Result<ComponentsByType, ComponentSetError> {
        for ids in self.groups.values_mut() {
            if has_duplicates(ids) {
                let mut kept: Vec<Uuid> = Vec::with_capacity(ids.len());
                for id in ids.iter() {
                    if !kept.contains(id) {
                        kept.push(*id);
                    }
                }
                *ids = kept;
            }
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks the component-set rules of spec §5.5, in the reference's order:
    /// shape per type first, then duplicates and ids under two types.
    pub fn validate(&self) -> Result<(), ComponentSetError> {
        if self.groups.is_empty() {
            return Err(ComponentSetError::Empty);
        }
        let mut all: Vec<(Uuid, usize, ComponentType)> = Vec::with_capacity(self.component_count());
        for (ty, ids) in self.iter() {
            if ty == ComponentType::Unknown {
                return Err(ComponentSetError::UnknownType);
            }
            if ids.is_empty() {
                return Err(ComponentSetError::EmptyType(ty));
            }
            for id in ids {
                if id.is_nil() {
                    return Err(ComponentSetError::NilId(ty));
                }
                all.push((*id, all.len(), ty));
            }
        }
        // Sorting by (id, position) puts every repeat of an id next to its
        // first occurrence, in iteration order.
        all.sort_unstable();
        for pair in all.windows(2) {
            let ((id, _, first), (next, _, second)) = (pair[0], pair[1]);
            if id == next {
                return Err(if first == second {
                    ComponentSetError::Duplicate(first, id)
                } else {
                    ComponentSetError::TwoTypes { id, first, second }
                });
            }
        }
        Ok(())
    }

    /// Sorts every type's ids in place (the frozen form).
    pub fn sort_ids(&mut self) {
        for ids in self.groups.values_mut() {
            ids.sort_unstable();
        }
    }

    /// Union per type with `other` (sorted, de-duplicated). A component id
    /// under two different types is an error.
    pub fn merge(&mut self, other: &ComponentsByType) -> Result<(), ComponentSetError> {
        for (ty, ids) in other.iter() {
            for id in ids {
                for (existing_ty, existing_ids) in self.iter() {
                    if existing_ty != ty && existing_ids.contains(id) {
                        return Err(ComponentSetError::MergeTwoTypes {
                            id: *id,
                            first: existing_ty,
                            second: ty,
                        });
                    }
                }
            }
            let entry = self.groups.entry(TypeByName(ty)).or_default();
            entry.extend_from_slice(ids);
            entry.sort();
            entry.dedup();
        }
        Ok(())
    }

    /// Removes, per type, the ids present in `other`; empty groups are dropped.
    pub fn subtract(&mut self, other: &ComponentsByType) {
        for (ty, ids) in other.iter() {
            if let Some(mine) = self.groups.get_mut(&TypeByName(ty)) {
                mine.retain(|id| !ids.contains(id));
            }
        }
        self.remove_empty();
    }

    /// A frozen copy with every type's ids sorted.
    pub fn sorted(&self) -> ComponentsByType {
        let mut out = self.clone();
        for ids in out.groups.values_mut() {
            ids.sort();
        }
        out
    }
}

impl Serialize for ComponentsByType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.groups.len()))?;
        for (ty, ids) in self.iter() {
            map.serialize_entry(ty.name(), ids)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ComponentsByType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: BTreeMap<String, Vec<Uuid>> = BTreeMap::deserialize(d)?;
        let mut out = ComponentsByType::new();
        for (name, ids) in raw {
            let ty = if name == "Unknown" {
                ComponentType::Unknown
            } else {
                ComponentType::parse(&name).ok_or_else(|| {
                    serde::de::Error::custom(format!("unknown component type {name:?}"))
                })?
            };
            out.insert(ty, ids);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn type_names_round_trip_case_insensitively() {
        for ty in ComponentType::KNOWN {
            assert_eq!(ComponentType::parse(ty.name()), Some(ty));
            assert_eq!(ComponentType::parse(&ty.name().to_uppercase()), Some(ty));
            assert_eq!(ComponentType::from_i32(ty as i32), Some(ty));
        }
        assert_eq!(
            ComponentType::parse("power-shelf"),
            Some(ComponentType::PowerShelf)
        );
        assert_eq!(ComponentType::parse("gpu"), None);
        assert_eq!(ComponentType::from_i32(7), None);
    }

    #[test]
    fn groups_iterate_by_type_name() {
        let mut set = ComponentsByType::new();
        set.push(ComponentType::Ums, id(1));
        set.push(ComponentType::Compute, id(2));
        set.push(ComponentType::Cdu, id(3));
        set.push(ComponentType::NvSwitch, id(4));
        let order: Vec<_> = set.iter().map(|(t, _)| t.name()).collect();
        assert_eq!(order, ["CDU", "Compute", "NVSwitch", "UMS"]);
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            format!(
                r#"{{"CDU":["{}"],"Compute":["{}"],"NVSwitch":["{}"],"UMS":["{}"]}}"#,
                id(3),
                id(2),
                id(4),
                id(1)
            )
        );
    }

    #[test]
    fn validate_reports_each_rule_with_reference_text() {
        assert_eq!(
            ComponentsByType::new().validate().unwrap_err().to_string(),
            "Non-empty ComponentsByType is required"
        );
        let mut unknown = ComponentsByType::new();
        unknown.push(ComponentType::Unknown, id(1));
        assert_eq!(
            unknown.validate().unwrap_err().to_string(),
            "ComponentsByType contains unknown component type"
        );
        let mut empty = ComponentsByType::new();
        empty.insert(ComponentType::Compute, vec![]);
        assert_eq!(
            empty.validate().unwrap_err().to_string(),
            "Compute must include at least one component"
        );
        let mut nil = ComponentsByType::new();
        nil.push(ComponentType::NvSwitch, Uuid::nil());
        assert_eq!(
            nil.validate().unwrap_err().to_string(),
            "NVSwitch contains empty component UUID"
        );
        let mut dup = ComponentsByType::new();
        dup.push(ComponentType::Compute, id(5));
        dup.push(ComponentType::Compute, id(5));
        assert_eq!(
            dup.validate().unwrap_err().to_string(),
            format!("Compute duplicates component {}", id(5))
        );
        assert_eq!(
            dup.normalized().unwrap().get(ComponentType::Compute),
            Some(&[id(5)][..])
        );
        let mut two = ComponentsByType::new();
        two.push(ComponentType::Compute, id(6));
        two.push(ComponentType::PowerShelf, id(6));
        assert_eq!(
            two.validate().unwrap_err().to_string(),
            format!(
                "component {} appears under both Compute and PowerShelf",
                id(6)
            )
        );
    }

    #[test]
    fn merge_unions_sorted_and_rejects_cross_type_ids() {
        let mut a = ComponentsByType::new();
        a.push(ComponentType::Compute, id(3));
        a.push(ComponentType::Compute, id(1));
        let mut b = ComponentsByType::new();
        b.push(ComponentType::Compute, id(2));
        b.push(ComponentType::Compute, id(1));
        b.push(ComponentType::NvSwitch, id(9));
        a.merge(&b).unwrap();
        assert_eq!(
            a.get(ComponentType::Compute),
            Some(&[id(1), id(2), id(3)][..])
        );
        assert_eq!(a.get(ComponentType::NvSwitch), Some(&[id(9)][..]));
        let mut c = ComponentsByType::new();
        c.push(ComponentType::PowerShelf, id(9));
        assert_eq!(
            a.merge(&c).unwrap_err().to_string(),
            format!(
                "components_by_type component {} appears under both NVSwitch and PowerShelf",
                id(9)
            )
        );
    }

    #[test]
    fn subtract_drops_emptied_types() {
        let mut a = ComponentsByType::new();
        a.push(ComponentType::Compute, id(1));
        a.push(ComponentType::Compute, id(2));
        a.push(ComponentType::NvSwitch, id(3));
        let mut b = ComponentsByType::new();
        b.push(ComponentType::NvSwitch, id(3));
        b.push(ComponentType::Compute, id(1));
        a.subtract(&b);
        assert_eq!(a.get(ComponentType::Compute), Some(&[id(2)][..]));
        assert_eq!(a.get(ComponentType::NvSwitch), None);
        a.subtract(&a.clone());
        assert!(a.is_empty());
    }
}
