//! `sqlx::migrate!` embeds the migration files at compile time; cargo does
//! not notice when they change, so tell it to rebuild the crate then.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
