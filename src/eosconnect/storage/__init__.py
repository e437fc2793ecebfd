"""eosconnect.storage"""
